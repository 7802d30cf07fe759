-- slidewin.sessions_closed(p_name, p_after_end, p_after_key, p_key, p_limit): what
-- `--emit final` prints -- sessions that are final (slidewin.session_is_final) and come after
-- (p_after_end, p_after_key) in (end_ts, uuid) order, at most p_limit. A follower passes the
-- last one it printed, so each session prints once, when it closes.
CREATE OR REPLACE FUNCTION slidewin.sessions_closed(
    p_name text, p_after_end timestamptz, p_after_key text DEFAULT '', p_key text DEFAULT NULL,
    p_limit integer DEFAULT 10000)
RETURNS TABLE (uuid text, start_ts timestamptz, end_ts timestamptz, n bigint, sum numeric,
               min bigint, max bigint, avg numeric)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_def   slidewin.session_defs := slidewin.session_def(p_name);
    v_close timestamptz := v_def.stream_ts - v_def.gap - v_def.grace;
BEGIN
    RETURN QUERY
    SELECT s.uuid, s.start_ts, s.end_ts, s.n, s.total, s.vmin, s.vmax, round(s.total / s.n, 6)
      FROM slidewin.session_store s
     WHERE s.def_id = v_def.id AND s.end_ts < v_close
       AND (s.end_ts, s.uuid) > (coalesce(p_after_end, '-infinity'), coalesce(p_after_key, ''))
       AND (p_key IS NULL OR s.uuid = p_key)
     ORDER BY s.end_ts, s.uuid
     LIMIT p_limit;
END
$$;
