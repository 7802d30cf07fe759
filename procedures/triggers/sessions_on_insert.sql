-- slidewin.sessions_on_insert(): AFTER INSERT statement trigger on slidewin.events (and each
-- partition) keeping every registered session definition's sessions (Kafka's KIP-94 semantics).
-- The transition table holds only the rows really inserted, so a duplicate or a replayed batch
-- changes no session: sessions are exactly once like the rollups. With no definition it returns
-- at once.
--
-- Per definition (gap g, grace r), for the statement's rows:
--   1. islands: each key's new events in ts order, split where two are more than g apart;
--   2. the stored sessions of those keys within g of an island (index session_store_key_end);
--   3. islands and those sessions in start order per key, a new group wherever one starts more
--      than g after every earlier one ends: a group is one session -- an event exactly g from a
--      session joins it, and an event within g of two sessions bridges them;
--   4. close rule: a group whose end is before close = (stream time before this transaction)
--      - g - r would reopen a closed session: its new events are dead-lettered as `late`
--      (source `session:NAME`) and change nothing; every other group is upserted as one session
--      (the stored session with the same start keeps its row), the others it absorbed are
--      deleted and kept as tombstones.
-- Work is the statement's rows plus the sessions they touch, never the table.
CREATE OR REPLACE FUNCTION slidewin.sessions_on_insert()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_def   slidewin.session_defs;
    v_base  timestamptz;
    v_close timestamptz;
    v_late  bigint;
    v_merges bigint;
    v_newest timestamptz;
    v_long_key   text;
    v_long_start timestamptz;
    v_long_end   timestamptz;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM slidewin.session_defs WHERE dropped_at IS NULL) THEN
        RETURN NULL;
    END IF;
    FOR v_def IN SELECT * FROM slidewin.session_defs WHERE dropped_at IS NULL ORDER BY id
                 FOR UPDATE
    LOOP
        IF v_def.base_xid IS DISTINCT FROM pg_current_xact_id() THEN
            v_base := v_def.stream_ts;
        ELSE
            v_base := v_def.base_ts;
        END IF;
        v_close := v_base - v_def.gap - v_def.grace;
        WITH marked AS (
            SELECT uuid, ts, val,
                   ts - lag(ts) OVER (PARTITION BY uuid ORDER BY ts) > v_def.gap AS brk
              FROM new_rows
        ), numbered AS (
            SELECT uuid, ts, val,
                   count(*) FILTER (WHERE brk) OVER (PARTITION BY uuid ORDER BY ts) AS grp
              FROM marked
        ), islands AS MATERIALIZED (
            SELECT uuid, min(ts) AS s, max(ts) AS e, count(*) AS n, sum(val) AS total,
                   min(val) AS vmin, max(val) AS vmax
              FROM numbered GROUP BY uuid, grp
        ), touched AS MATERIALIZED (
            SELECT DISTINCT s.uuid, s.start_ts, s.end_ts, s.n, s.total, s.vmin, s.vmax
              FROM islands i
              JOIN slidewin.session_store s
                ON s.def_id = v_def.id AND s.uuid = i.uuid
               AND s.end_ts >= i.s - v_def.gap AND s.start_ts <= i.e + v_def.gap
        ), items AS (
            SELECT uuid, s, e, n, total, vmin, vmax, true AS fresh FROM islands
            UNION ALL
            SELECT uuid, start_ts, end_ts, n, total, vmin, vmax, false FROM touched
        ), breaks AS (
            SELECT *, s > max(e) OVER (PARTITION BY uuid ORDER BY s, e
                                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                          + v_def.gap AS brk
              FROM items
        ), grouped AS MATERIALIZED (
            SELECT *, count(*) FILTER (WHERE brk) OVER (PARTITION BY uuid ORDER BY s, e
                                                         ROWS UNBOUNDED PRECEDING) AS grp
              FROM breaks
        ), sessions_new AS MATERIALIZED (
            SELECT uuid, grp, min(s) AS s, max(e) AS e, sum(n)::bigint AS n, sum(total) AS total,
                   min(vmin) AS vmin, max(vmax) AS vmax,
                   count(*) FILTER (WHERE NOT fresh) AS olds,
                   coalesce(max(e) < v_close, false) AS late
              FROM grouped GROUP BY uuid, grp
        ), upserted AS (  -- data-modifying CTEs run to completion, read or not
            INSERT INTO slidewin.session_store AS t
                   (def_id, uuid, start_ts, end_ts, n, total, vmin, vmax, version)
            SELECT v_def.id, uuid, s, e, n, total, vmin, vmax, v_def.version + 1
              FROM sessions_new WHERE NOT late
            ON CONFLICT (def_id, uuid, start_ts) DO UPDATE
               SET end_ts = excluded.end_ts, n = excluded.n, total = excluded.total,
                   vmin = excluded.vmin, vmax = excluded.vmax, version = excluded.version
            RETURNING 1
        ), absorbed AS (
            SELECT g.uuid, g.s AS start_ts, g.e AS end_ts, m.s AS merged_start
              FROM grouped g JOIN sessions_new m USING (uuid, grp)
             WHERE NOT g.fresh AND NOT m.late AND g.s <> m.s
        ), deleted AS (
            DELETE FROM slidewin.session_store t USING absorbed a
             WHERE t.def_id = v_def.id AND t.uuid = a.uuid AND t.start_ts = a.start_ts
            RETURNING 1
        ), tombs AS (
            INSERT INTO slidewin.session_tombstones
                   (def_id, uuid, start_ts, end_ts, version, merged_start)
            SELECT v_def.id, uuid, start_ts, end_ts, v_def.version + 1, merged_start
              FROM absorbed
            RETURNING 1
        ), late_events AS (
            SELECT r.uuid, r.val, r.ts, m.s, m.e
              FROM grouped g JOIN sessions_new m USING (uuid, grp)
              JOIN new_rows r ON r.uuid = g.uuid AND r.ts BETWEEN g.s AND g.e
             WHERE g.fresh AND m.late
        ), dead AS (
            INSERT INTO slidewin.dead_letters (source, reason, detail, raw, event_ts)
            SELECT 'session:' || v_def.name, 'late',
                   format('late for session window %s (gap %s, grace %s): its session [%s, %s] '
                          'ends before the close time %s; the event is stored, the session '
                          'is not changed', v_def.name, v_def.gap, v_def.grace, s, e, v_close),
                   json_build_object('uuid', uuid, 'val', val, 'ts', ts)::text, ts
              FROM late_events
            RETURNING 1
        )
        SELECT (SELECT count(*) FROM dead),
               (SELECT coalesce(sum(olds - 1), 0) FROM sessions_new WHERE olds > 1 AND NOT late),
               (SELECT max(e) FROM islands), l.uuid, l.s, l.e
          FROM (SELECT 1) AS one
          LEFT JOIN LATERAL (SELECT uuid, s, e FROM sessions_new WHERE NOT late
                              ORDER BY e - s DESC, uuid LIMIT 1) AS l ON true
          INTO v_late, v_merges, v_newest, v_long_key, v_long_start, v_long_end;
        UPDATE slidewin.session_defs
           SET base_ts = v_base, base_xid = pg_current_xact_id(),
               stream_ts = CASE WHEN stream_ts IS NULL THEN v_newest
                                ELSE greatest(stream_ts, v_newest) END,
               version = version + 1, merges = merges + v_merges, late = late + v_late
         WHERE id = v_def.id;
        IF v_long_key IS NOT NULL AND (v_def.longest_end IS NULL
           OR v_long_end - v_long_start > v_def.longest_end - v_def.longest_start) THEN
            UPDATE slidewin.session_defs
               SET longest_key = v_long_key, longest_start = v_long_start, longest_end = v_long_end
             WHERE id = v_def.id;
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
