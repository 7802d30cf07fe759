-- slidewin.sessions(p_key, p_name, p_from, p_to, p_limit): the session windows of one key (or,
-- with p_key NULL, of every key: the p_limit sessions ending last) under the definition p_name
-- (NULL: the only one in force), overlapping [p_from, p_to) when given, in start order.
-- Each row: key, [start_ts, end_ts] (first and last event), n, sum, min, max, avg, and final
-- (Kafka's close rule, slidewin.session_is_final). One key's read is one index range of its own
-- sessions; every key's at most p_limit rows of one index.
CREATE OR REPLACE FUNCTION slidewin.sessions(
    p_key text, p_name text DEFAULT NULL, p_from timestamptz DEFAULT NULL,
    p_to timestamptz DEFAULT NULL, p_limit integer DEFAULT 1000)
RETURNS TABLE (uuid text, start_ts timestamptz, end_ts timestamptz, n bigint, sum numeric,
               min bigint, max bigint, avg numeric, final boolean)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_def slidewin.session_defs := slidewin.session_def(p_name);
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 100000 THEN
        RAISE EXCEPTION 'p_limit must be from 1 to 100000, got %', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_key IS NOT NULL THEN
        RETURN QUERY
        SELECT s.uuid, s.start_ts, s.end_ts, s.n, s.total, s.vmin, s.vmax,
               round(s.total / s.n, 6), slidewin.session_is_final(s.end_ts, v_def)
          FROM slidewin.session_store s
         WHERE s.def_id = v_def.id AND s.uuid = p_key
           AND (p_from IS NULL OR s.end_ts >= p_from) AND (p_to IS NULL OR s.start_ts < p_to)
         ORDER BY s.end_ts
         LIMIT p_limit;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT * FROM (
        SELECT s.uuid, s.start_ts, s.end_ts, s.n, s.total, s.vmin, s.vmax,
               round(s.total / s.n, 6), slidewin.session_is_final(s.end_ts, v_def)
          FROM slidewin.session_store s
         WHERE s.def_id = v_def.id
           AND (p_from IS NULL OR s.end_ts >= p_from) AND (p_to IS NULL OR s.start_ts < p_to)
         ORDER BY s.end_ts DESC
         LIMIT p_limit) AS last
     ORDER BY last.start_ts, last.uuid;
END
$$;
