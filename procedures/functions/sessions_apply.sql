-- slidewin.sessions_apply(p_def_id, islands...): merge islands of accepted events into a session
-- definition's sessions -- the heart of session windows (KIP-94).
--
-- An island is one key's new events in ts order with no two more than the gap apart: key,
-- first and last event time, n, sum, min, max. The caller computes them from rows really
-- inserted -- the insert trigger from its transition table, the ingest sink from a chunk it
-- COPYed whole -- so sessions are exactly once, and only from events that are not late: no
-- island may start before base_ts - grace (slidewin.session_begin; late events go to
-- slidewin.sessions_late instead). Then, per definition:
--   1. the stored sessions of those keys within the gap of an island (one index probe each);
--   2. islands and those sessions in start order per key, a new group wherever one starts more
--      than the gap after every earlier one ends: a group is one session -- an event exactly
--      the gap from a session joins it, and one within the gap of two sessions bridges them.
--      The stored session a group starts with is updated, or a new row inserted; the stored
--      sessions it absorbed are deleted and kept as tombstones. Islands of keys with no stored
--      session nearby are sessions as they are: only the others are grouped;
--   3. the definition's stream time, version, merges, events and sessions created, and longest
--      session (the time spent is added by the callers, who also find the islands): of equal
--      lengths the smaller (key, start), so the one named does not depend on the order of the
--      islands or on how the events were split into statements, chunks and calls.
--
-- Why a final session never changes: it ends before stream time - gap - grace, and an event
-- that could join it (at most the gap after it) would be older than stream time - grace, which
-- is late. So the merge is the same whatever batches, statements or calls the events arrive in.
-- Work is the islands plus the sessions they touch, never the table; callers pass at most a few
-- ten thousand islands per call. A removed (or unknown) definition changes nothing. Returns the
-- sessions written.
DROP FUNCTION IF EXISTS slidewin.sessions_apply(
    integer, text[], timestamptz[], timestamptz[], bigint[], numeric[], bigint[], bigint[]);
CREATE OR REPLACE FUNCTION slidewin.sessions_apply(
    p_def_id integer, p_uuid text[], p_s timestamptz[], p_e timestamptz[], p_n bigint[],
    p_total numeric[], p_vmin bigint[], p_vmax bigint[])
RETURNS bigint
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_def        slidewin.session_defs := slidewin.session_begin(p_def_id);
    v_cut        timestamptz := v_def.base_ts - v_def.grace;
    v_written    bigint;
    v_created    bigint;
    v_events     bigint;
    v_merges     bigint;
    v_newest     timestamptz;
    v_long_key   text;
    v_long_start timestamptz;
    v_long_end   timestamptz;
    v_longer     boolean;
BEGIN
    IF v_def.id IS NULL OR coalesce(cardinality(p_uuid), 0) = 0 THEN
        RETURN 0;
    END IF;
    IF v_cut IS NOT NULL AND (SELECT min(s) FROM unnest(p_s) AS s) < v_cut THEN
        RAISE EXCEPTION 'an island of session window % starts before % (stream time % - grace %)',
                        v_def.name, v_cut, v_def.base_ts, v_def.grace
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'pass late events to slidewin.sessions_late, not sessions_apply';
    END IF;
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
    ), flagged AS MATERIALIZED (  -- a hash join, not NOT IN: that is a scan per island once
                                  -- the keys touched outgrow work_mem
        SELECT i.*, k.uuid IS NOT NULL AS near
          FROM islands i LEFT JOIN keys_touched k ON k.uuid = i.uuid
    ), items AS (  -- only keys with stored sessions nearby need grouping: one call's islands
                   -- of one key already lie more than the gap apart
        SELECT f.uuid, f.s, f.e, f.n, f.total, f.vmin, f.vmax, true AS fresh
          FROM flagged f WHERE f.near
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
        SELECT f.uuid, -1::bigint AS grp, f.s, f.e, f.n, f.total, f.vmin, f.vmax,
               0::bigint AS olds, NULL::timestamptz AS old_first
          FROM flagged f WHERE NOT f.near
        UNION ALL
        SELECT g.uuid, g.grp, min(g.s), max(g.e), sum(g.n)::bigint, sum(g.total), min(g.vmin),
               max(g.vmax), count(*) FILTER (WHERE NOT g.fresh),
               min(g.s) FILTER (WHERE NOT g.fresh)
          FROM grouped g GROUP BY g.uuid, g.grp
    ), inserted AS (  -- data-modifying CTEs run to completion, read or not
        INSERT INTO slidewin.session_store
               (def_id, uuid, start_ts, end_ts, n, total, vmin, vmax, version)
        SELECT v_def.id, m.uuid, m.s, m.e, m.n, m.total, m.vmin, m.vmax, v_def.version + 1
          FROM merged m WHERE m.old_first IS DISTINCT FROM m.s
        RETURNING 1
    ), updated AS (  -- a group starting with a stored session keeps that session's row
        UPDATE slidewin.session_store t
           SET end_ts = m.e, n = m.n, total = m.total, vmin = m.vmin, vmax = m.vmax,
               version = v_def.version + 1
          FROM merged m
         WHERE m.old_first = m.s
           AND t.def_id = v_def.id AND t.uuid = m.uuid AND t.start_ts = m.s
    ), absorbed AS (
        SELECT g.uuid, g.s AS start_ts, g.e AS end_ts, m.s AS merged_start
          FROM grouped g JOIN merged m ON m.uuid = g.uuid AND m.grp = g.grp
         WHERE NOT g.fresh AND g.s <> m.s
    ), deleted AS (
        DELETE FROM slidewin.session_store t USING absorbed a
         WHERE t.def_id = v_def.id AND t.uuid = a.uuid AND t.start_ts = a.start_ts
    ), tombs AS (
        INSERT INTO slidewin.session_tombstones
               (def_id, uuid, start_ts, end_ts, version, merged_start)
        SELECT v_def.id, a.uuid, a.start_ts, a.end_ts, v_def.version + 1, a.merged_start
          FROM absorbed a
    )
    SELECT (SELECT count(*) FROM merged), (SELECT count(*) FROM inserted),
           (SELECT coalesce(sum(m.olds - 1), 0) FROM merged m WHERE m.olds > 1),
           (SELECT max(i.e) FROM islands i), (SELECT sum(i.n) FROM islands i), l.uuid, l.s, l.e
      FROM (SELECT 1) AS one
      LEFT JOIN LATERAL (SELECT m.uuid, m.s, m.e FROM merged m
                          ORDER BY m.e - m.s DESC, m.uuid, m.s LIMIT 1) AS l ON true
      INTO v_written, v_created, v_merges, v_newest, v_events, v_long_key, v_long_start,
           v_long_end;
    -- v_def is the row locked by session_begin, as every earlier call of the transaction left it
    v_longer := v_long_key IS NOT NULL AND (v_def.longest_end IS NULL
        OR (v_long_end - v_long_start, v_def.longest_key, v_def.longest_start)
           > (v_def.longest_end - v_def.longest_start, v_long_key, v_long_start));
    UPDATE slidewin.session_defs d
       SET stream_ts = CASE WHEN d.stream_ts IS NULL THEN v_newest
                            ELSE greatest(d.stream_ts, v_newest) END,
           version = d.version + 1, merges = d.merges + v_merges,
           events = d.events + v_events, created = d.created + v_created,
           longest_key = CASE WHEN v_longer THEN v_long_key ELSE d.longest_key END,
           longest_start = CASE WHEN v_longer THEN v_long_start ELSE d.longest_start END,
           longest_end = CASE WHEN v_longer THEN v_long_end ELSE d.longest_end END
     WHERE d.id = v_def.id;
    RETURN v_written;
END
$$;
