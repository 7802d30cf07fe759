-- slidewin.session_stats(p_name): one definition at a glance -- its stream time, open sessions
-- (not yet final: one index range of the sessions ending at or after the close time, so the
-- work grows with the open sessions, not the stored ones), merges and late events so far, the
-- longest session seen (kept by the trigger), and what keeping it has cost: events merged,
-- sessions created and seconds spent (events per session near one: its keys rarely recur).
DROP FUNCTION IF EXISTS slidewin.session_stats(text);
CREATE OR REPLACE FUNCTION slidewin.session_stats(p_name text DEFAULT NULL)
RETURNS TABLE (name text, stream_ts timestamptz, open bigint, merges bigint, late bigint,
               longest_key text, longest_start timestamptz, longest_end timestamptz,
               events bigint, created bigint, apply_seconds double precision)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_def slidewin.session_defs := slidewin.session_def(p_name);
BEGIN
    RETURN QUERY
    SELECT v_def.name, v_def.stream_ts,
           (SELECT count(*) FROM slidewin.session_store s
             WHERE s.def_id = v_def.id
               AND s.end_ts >= coalesce(v_def.stream_ts - v_def.gap - v_def.grace, '-infinity')),
           v_def.merges, v_def.late, v_def.longest_key, v_def.longest_start, v_def.longest_end,
           v_def.events, v_def.created, v_def.apply_seconds;
END
$$;
