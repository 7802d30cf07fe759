-- slidewin.sessions_on_insert(): AFTER INSERT statement trigger on slidewin.events (and each
-- partition) keeping every registered session definition's sessions (Kafka's KIP-94 semantics).
-- The transition table holds only the rows really inserted, so a duplicate or a replayed batch
-- changes no session: sessions are exactly once like the rollups. With no definition it returns
-- at once.
--
-- Per definition: the statement's islands -- each key's new events in ts order, split where two
-- are more than the gap apart -- go to slidewin.sessions_apply, and the events of the islands it
-- returns as late are dead-lettered (reason `late`, source `session:NAME`; the events stay
-- stored). The ingest sink computes the islands of a chunk it COPYs whole itself and names the
-- definitions it applies in the transaction-local setting slidewin.presummed_sessions (ids,
-- comma-separated), set around that COPY alone: the trigger skips those definitions, and keeps
-- any other -- one added while the batch runs included.
CREATE OR REPLACE FUNCTION slidewin.sessions_on_insert()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_def  slidewin.session_defs;
    v_skip integer[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM slidewin.session_defs WHERE dropped_at IS NULL) THEN
        RETURN NULL;
    END IF;
    v_skip := string_to_array(nullif(current_setting('slidewin.presummed_sessions', true), ''),
                              ',')::integer[];
    FOR v_def IN SELECT * FROM slidewin.session_defs
                  WHERE dropped_at IS NULL AND NOT (id = ANY (coalesce(v_skip, '{}')))
                  ORDER BY id
    LOOP
        WITH marked AS (
            SELECT r.uuid, r.ts, r.val,
                   r.ts - lag(r.ts) OVER (PARTITION BY r.uuid COLLATE "C" ORDER BY r.ts)
                       > v_def.gap AS brk
              FROM new_rows r
        ), numbered AS (
            SELECT m.uuid, m.ts, m.val,
                   count(*) FILTER (WHERE m.brk)
                       OVER (PARTITION BY m.uuid COLLATE "C" ORDER BY m.ts) AS grp
              FROM marked m
        ), islands AS (
            SELECT x.uuid, min(x.ts) AS s, max(x.ts) AS e, count(*) AS n, sum(x.val) AS total,
                   min(x.val) AS vmin, max(x.val) AS vmax
              FROM numbered x GROUP BY x.uuid, x.grp
        ), late AS (
            SELECT a.*
              FROM (SELECT array_agg(uuid) AS u, array_agg(s) AS s, array_agg(e) AS e,
                           array_agg(n) AS n, array_agg(total) AS total,
                           array_agg(vmin) AS vmin, array_agg(vmax) AS vmax
                      FROM islands) AS i,
                   LATERAL slidewin.sessions_apply(v_def.id, i.u, i.s, i.e, i.n, i.total,
                                                   i.vmin, i.vmax) AS a
        )
        INSERT INTO slidewin.dead_letters (source, reason, detail, raw, event_ts)
        SELECT 'session:' || v_def.name, 'late',
               slidewin.session_late_detail(v_def, l.first_ts, l.last_ts, l.close_ts),
               json_build_object('uuid', r.uuid, 'val', r.val, 'ts', r.ts)::text, r.ts
          FROM late l
          JOIN new_rows r ON r.uuid = l.uuid AND r.ts BETWEEN l.first_ts AND l.last_ts;
    END LOOP;
    RETURN NULL;
END
$$;
