-- slidewin.session_changes(p_name, p_after, p_key, p_limit): what `--emit update` prints -- the
-- sessions written and the tombstones of sessions merged away by statements whose version is
-- above p_after, in version order (tombstones of a version before its merged session), at most
-- p_limit of each. Versions become visible in order (slidewin.session_defs), so a follower that
-- remembers the last version it printed misses nothing and prints nothing twice -- except a
-- session changed again later, which prints again with its new aggregates, as Kafka re-emits.
CREATE OR REPLACE FUNCTION slidewin.session_changes(
    p_name text, p_after bigint, p_key text DEFAULT NULL, p_limit integer DEFAULT 10000)
RETURNS TABLE (version bigint, tombstone boolean, uuid text, start_ts timestamptz,
               end_ts timestamptz, n bigint, sum numeric, min bigint, max bigint, avg numeric,
               final boolean, merged_start timestamptz)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_def slidewin.session_defs := slidewin.session_def(p_name);
BEGIN
    RETURN QUERY
    SELECT * FROM (
        (SELECT t.version, true, t.uuid, t.start_ts, t.end_ts, NULL::bigint, NULL::numeric,
                NULL::bigint, NULL::bigint, NULL::numeric, NULL::boolean, t.merged_start
           FROM slidewin.session_tombstones t
          WHERE t.def_id = v_def.id AND t.version > p_after
            AND (p_key IS NULL OR t.uuid = p_key)
          ORDER BY t.version LIMIT p_limit)
        UNION ALL
        (SELECT s.version, false, s.uuid, s.start_ts, s.end_ts, s.n, s.total, s.vmin, s.vmax,
                round(s.total / s.n, 6), slidewin.session_is_final(s.end_ts, v_def), NULL
           FROM slidewin.session_store s
          WHERE s.def_id = v_def.id AND s.version > p_after
            AND (p_key IS NULL OR s.uuid = p_key)
          ORDER BY s.version LIMIT p_limit)) AS c
     ORDER BY 1, 2 DESC, 3, 4;
END
$$;
