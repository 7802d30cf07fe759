-- slidewin.sessions_expire(p_chunk): delete at most p_chunk sessions (and as many tombstones)
-- per definition that have outlived its retention -- end_ts < stream time - retention, relative
-- to the definition's own stream time, independent of the raw rows' nibbles -- oldest first
-- (index session_store_end); and, for a removed definition, p_chunk of its sessions, then its
-- row once none is left. Bounded like a nibble; returns the sessions deleted. Run by the
-- retention job (slidewin jobs run) and callable from psql.
CREATE OR REPLACE FUNCTION slidewin.sessions_expire(p_chunk integer DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_def     slidewin.session_defs;
    v_horizon timestamptz;
    v_done    bigint := 0;
    v_count   bigint;
BEGIN
    PERFORM slidewin.check_chunk(p_chunk);
    FOR v_def IN SELECT * FROM slidewin.session_defs ORDER BY id LOOP
        v_horizon := CASE WHEN v_def.dropped_at IS NOT NULL THEN 'infinity'::timestamptz
                          ELSE v_def.stream_ts - v_def.retention END;
        CONTINUE WHEN v_horizon IS NULL;
        DELETE FROM slidewin.session_store s
         WHERE (s.def_id, s.uuid, s.start_ts) IN (
               SELECT x.def_id, x.uuid, x.start_ts FROM slidewin.session_store x
                WHERE x.def_id = v_def.id AND x.end_ts < v_horizon
                ORDER BY x.end_ts LIMIT p_chunk);
        GET DIAGNOSTICS v_count = ROW_COUNT;
        v_done := v_done + v_count;
        DELETE FROM slidewin.session_tombstones t
         WHERE t.ctid IN (SELECT x.ctid FROM slidewin.session_tombstones x
                           WHERE x.def_id = v_def.id AND x.end_ts < v_horizon
                           ORDER BY x.end_ts LIMIT p_chunk);
        IF v_def.dropped_at IS NOT NULL AND v_count < p_chunk
           AND NOT EXISTS (SELECT 1 FROM slidewin.session_store WHERE def_id = v_def.id)
           AND NOT EXISTS (SELECT 1 FROM slidewin.session_tombstones WHERE def_id = v_def.id) THEN
            PERFORM slidewin.session_def_forget(v_def.id);  -- the jobs may delete no other
        END IF;
    END LOOP;
    RETURN v_done;
END
$$;
