-- slidewin.session_is_final(p_end, p_def): Kafka's close rule for a session ending at p_end --
-- final once p_end < stream time - gap - grace (no event the store accepts can change it).
CREATE OR REPLACE FUNCTION slidewin.session_is_final(p_end timestamptz, p_def slidewin.session_defs)
RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    SELECT coalesce(p_end < p_def.stream_ts - p_def.gap - p_def.grace, false)
$$;
