-- slidewin.sessions_apply(p_def_id, islands...): merge one statement's (or one ingest chunk's)
-- islands into a session definition's sessions -- the heart of session windows (KIP-94).
--
-- An island is one key's new events in ts order with no two more than the gap apart: key,
-- first and last event time, n, sum, min, max. The caller computes them from rows really
-- inserted -- the insert trigger from its transition table, the ingest sink from a chunk it
-- COPYed whole -- so sessions are exactly once. Then, per definition:
--   1. the stored sessions of those keys within the gap of an island (one index probe each);
--   2. islands and those sessions in start order per key, a new group wherever one starts more
--      than the gap after every earlier one ends: a group is one session -- an event exactly
--      the gap from a session joins it, and one within the gap of two sessions bridges them;
--   3. close rule: a group ending before close = (stream time before this transaction) - gap -
--      grace would change a closed session: its islands are returned as late (the caller
--      dead-letters their events) and change nothing; every other group is one session -- the
--      stored session it starts with is updated, or a new row inserted -- and the stored
--      sessions it absorbed are deleted and kept as tombstones. Islands of keys with no stored
--      session nearby are sessions as they are: only the others are grouped;
--   4. the definition's stream time, version, merges, late count and longest session.
-- Work is the islands plus the sessions they touch, never the table. A removed (or unknown)
-- definition returns nothing and changes nothing.
CREATE OR REPLACE FUNCTION slidewin.sessions_apply(
    p_def_id integer, p_uuid text[], p_s timestamptz[], p_e timestamptz[], p_n bigint[],
    p_total numeric[], p_vmin bigint[], p_vmax bigint[])
RETURNS TABLE (uuid text, first_ts timestamptz, last_ts timestamptz, close_ts timestamptz)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_def        slidewin.session_defs;
    v_base       timestamptz;
    v_close      timestamptz;
    v_late       bigint;
    v_merges     bigint;
    v_newest     timestamptz;
    v_long_key   text;
    v_long_start timestamptz;
    v_long_end   timestamptz;
    v_late_uuid  text[];
    v_late_s     timestamptz[];
    v_late_e     timestamptz[];
BEGIN
    SELECT * INTO v_def FROM slidewin.session_defs d
     WHERE d.id = p_def_id AND d.dropped_at IS NULL FOR UPDATE;
    IF NOT FOUND OR coalesce(cardinality(p_uuid), 0) = 0 THEN
        RETURN;
    END IF;
    -- a batch (one transaction) is judged against the stream time committed before it
    IF v_def.base_xid IS DISTINCT FROM pg_current_xact_id() THEN
        v_base := v_def.stream_ts;
    ELSE
        v_base := v_def.base_ts;
    END IF;
    v_close := v_base - v_def.gap - v_def.grace;
    WITH islands AS MATERIALIZED (
        SELECT * FROM unnest(p_uuid, p_s, p_e, p_n, p_total, p_vmin, p_vmax)
                   AS i(uuid, s, e, n, total, vmin, vmax)
    ), touched AS MATERIALIZED (  -- one index probe per island, never a scan
        SELECT DISTINCT x.uuid, x.start_ts, x.end_ts, x.n, x.total, x.vmin, x.vmax
          FROM islands i
         CROSS JOIN LATERAL (
               SELECT * FROM slidewin.session_store t
                WHERE t.def_id = v_def.id AND t.uuid = i.uuid
                  AND t.end_ts >= i.s - v_def.gap AND t.start_ts <= i.e + v_def.gap
                OFFSET 0) AS x
    ), keys_touched AS MATERIALIZED (
        SELECT DISTINCT t.uuid FROM touched t
    ), items AS (  -- only keys with stored sessions nearby need grouping: a batch's islands
                   -- of one key already lie more than the gap apart
        SELECT i.uuid, i.s, i.e, i.n, i.total, i.vmin, i.vmax, true AS fresh
          FROM islands i WHERE i.uuid IN (SELECT k.uuid FROM keys_touched k)
        UNION ALL
        SELECT t.uuid, t.start_ts, t.end_ts, t.n, t.total, t.vmin, t.vmax, false FROM touched t
    ), breaks AS (
        SELECT it.*, it.s > max(it.e) OVER (PARTITION BY it.uuid COLLATE "C" ORDER BY it.s, it.e
                                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                            + v_def.gap AS brk
          FROM items it
    ), grouped AS MATERIALIZED (
        SELECT b.*, count(*) FILTER (WHERE b.brk)
                        OVER (PARTITION BY b.uuid COLLATE "C" ORDER BY b.s, b.e
                              ROWS UNBOUNDED PRECEDING) AS grp
          FROM breaks b
    ), merged AS MATERIALIZED (
        SELECT i.uuid, -1::bigint AS grp, i.s, i.e, i.n, i.total, i.vmin, i.vmax,
               0::bigint AS olds, NULL::timestamptz AS old_first,
               coalesce(i.e < v_close, false) AS late
          FROM islands i WHERE i.uuid NOT IN (SELECT k.uuid FROM keys_touched k)
        UNION ALL
        SELECT g.uuid, g.grp, min(g.s), max(g.e), sum(g.n)::bigint, sum(g.total), min(g.vmin),
               max(g.vmax), count(*) FILTER (WHERE NOT g.fresh),
               min(g.s) FILTER (WHERE NOT g.fresh), coalesce(max(g.e) < v_close, false)
          FROM grouped g GROUP BY g.uuid, g.grp
    ), inserted AS (  -- data-modifying CTEs run to completion, read or not
        INSERT INTO slidewin.session_store
               (def_id, uuid, start_ts, end_ts, n, total, vmin, vmax, version)
        SELECT v_def.id, m.uuid, m.s, m.e, m.n, m.total, m.vmin, m.vmax, v_def.version + 1
          FROM merged m WHERE NOT m.late AND m.old_first IS DISTINCT FROM m.s
    ), updated AS (  -- a group starting with a stored session keeps that session's row
        UPDATE slidewin.session_store t
           SET end_ts = m.e, n = m.n, total = m.total, vmin = m.vmin, vmax = m.vmax,
               version = v_def.version + 1
          FROM merged m
         WHERE NOT m.late AND m.old_first = m.s
           AND t.def_id = v_def.id AND t.uuid = m.uuid AND t.start_ts = m.s
    ), absorbed AS (
        SELECT g.uuid, g.s AS start_ts, g.e AS end_ts, m.s AS merged_start
          FROM grouped g JOIN merged m ON m.uuid = g.uuid AND m.grp = g.grp
         WHERE NOT g.fresh AND NOT m.late AND g.s <> m.s
    ), deleted AS (
        DELETE FROM slidewin.session_store t USING absorbed a
         WHERE t.def_id = v_def.id AND t.uuid = a.uuid AND t.start_ts = a.start_ts
    ), tombs AS (
        INSERT INTO slidewin.session_tombstones
               (def_id, uuid, start_ts, end_ts, version, merged_start)
        SELECT v_def.id, a.uuid, a.start_ts, a.end_ts, v_def.version + 1, a.merged_start
          FROM absorbed a
    ), late AS MATERIALIZED (
        SELECT m.uuid, m.s, m.e, m.n FROM merged m WHERE m.late AND m.grp = -1
        UNION ALL
        SELECT g.uuid, g.s, g.e, g.n
          FROM grouped g JOIN merged m ON m.uuid = g.uuid AND m.grp = g.grp
         WHERE g.fresh AND m.late
    )
    SELECT (SELECT coalesce(sum(x.n), 0) FROM late x),
           (SELECT array_agg(x.uuid ORDER BY x.uuid, x.s) FROM late x),
           (SELECT array_agg(x.s ORDER BY x.uuid, x.s) FROM late x),
           (SELECT array_agg(x.e ORDER BY x.uuid, x.s) FROM late x),
           (SELECT coalesce(sum(m.olds - 1), 0) FROM merged m WHERE m.olds > 1 AND NOT m.late),
           (SELECT max(i.e) FROM islands i), l.uuid, l.s, l.e
      FROM (SELECT 1) AS one
      LEFT JOIN LATERAL (SELECT m.uuid, m.s, m.e FROM merged m WHERE NOT m.late
                          ORDER BY m.e - m.s DESC, m.uuid LIMIT 1) AS l ON true
      INTO v_late, v_late_uuid, v_late_s, v_late_e, v_merges, v_newest, v_long_key,
           v_long_start, v_long_end;
    UPDATE slidewin.session_defs d
       SET base_ts = v_base, base_xid = pg_current_xact_id(),
           stream_ts = CASE WHEN d.stream_ts IS NULL THEN v_newest
                            ELSE greatest(d.stream_ts, v_newest) END,
           version = d.version + 1, merges = d.merges + v_merges, late = d.late + v_late,
           longest_key = CASE WHEN v_long_key IS NOT NULL AND (d.longest_end IS NULL
                                   OR v_long_end - v_long_start > d.longest_end - d.longest_start)
                              THEN v_long_key ELSE d.longest_key END,
           longest_start = CASE WHEN v_long_key IS NOT NULL AND (d.longest_end IS NULL
                                   OR v_long_end - v_long_start > d.longest_end - d.longest_start)
                                THEN v_long_start ELSE d.longest_start END,
           longest_end = CASE WHEN v_long_key IS NOT NULL AND (d.longest_end IS NULL
                                   OR v_long_end - v_long_start > d.longest_end - d.longest_start)
                              THEN v_long_end ELSE d.longest_end END
     WHERE d.id = v_def.id;
    RETURN QUERY SELECT l.uuid, l.s, l.e, v_close FROM unnest(v_late_uuid, v_late_s, v_late_e) AS l(uuid, s, e);
END
$$;
