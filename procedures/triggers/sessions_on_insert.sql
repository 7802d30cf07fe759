-- slidewin.sessions_on_insert(): AFTER INSERT statement trigger on a stream's table (and each
-- partition) keeping the session definitions of that stream (Kafka's KIP-94 semantics): the
-- stream is TG_ARGV[0], none for the built-in events (slidewin.attach_session_trigger). A
-- definition's key is the stream's key column (as text), its time the time column, its value
-- its measure (none: the sessions count events only). The transition table holds only the rows
-- really inserted, so a duplicate or a replayed batch changes no session: sessions are exactly
-- once like the rollups. With no definition of the stream it returns at once.
--
-- Per definition: events older than the stream time before the transaction minus grace
-- (slidewin.session_begin) are late -- dead-lettered by slidewin.sessions_late (reason `late`,
-- source `session:NAME`; the events stay stored); the others make the statement's islands --
-- each key's new events in ts order, split where two are more than the gap apart -- which go to
-- slidewin.sessions_apply in slices of at most 20,000 islands, so no one call grows with the
-- statement. The ingest sink computes the islands of a chunk of events it COPYs whole itself
-- and names the definitions it applies in the transaction-local setting
-- slidewin.presummed_sessions (ids, comma-separated), set around that COPY alone: the trigger
-- skips those definitions, and keeps any other -- one added while the batch runs included.
-- The transition table is read through format('%I') of the registry's column names.
CREATE OR REPLACE FUNCTION slidewin.sessions_on_insert()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    c_slice  CONSTANT integer := 20000;
    v_def    slidewin.session_defs;
    v_skip   integer[];
    v_cut    timestamptz;
    v_uuid   text[];
    v_s      timestamptz[];
    v_e      timestamptz[];
    v_n      bigint[];
    v_total  numeric[];
    v_vmin   bigint[];
    v_vmax   bigint[];
    v_began  timestamptz;
    v_stream text := coalesce(TG_ARGV[0], 'events');
    v_key    text;
    v_time   text;
    v_rows   text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM slidewin.session_defs
                    WHERE dropped_at IS NULL AND stream = v_stream) THEN
        RETURN NULL;
    END IF;
    SELECT key_column, time_column INTO STRICT v_key, v_time
      FROM slidewin.streams WHERE name = v_stream;
    v_skip := string_to_array(nullif(current_setting('slidewin.presummed_sessions', true), ''),
                              ',')::integer[];
    FOR v_def IN SELECT * FROM slidewin.session_defs
                  WHERE dropped_at IS NULL AND stream = v_stream
                    AND NOT (id = ANY (coalesce(v_skip, '{}')))
                  ORDER BY id
    LOOP
        v_began := clock_timestamp();
        v_def := slidewin.session_begin(v_def.id);
        CONTINUE WHEN v_def.id IS NULL;
        v_cut := v_def.base_ts - v_def.grace;
        v_rows := format('SELECT %I::text AS uuid, %I AS ts, %s AS val FROM new_rows', v_key,
                         v_time, CASE WHEN v_def.measure IS NULL THEN 'NULL::bigint'
                                      ELSE format('%I::bigint', v_def.measure) END);
        IF v_cut IS NOT NULL THEN
            EXECUTE format('SELECT slidewin.sessions_late($1, array_agg(r.uuid), '
                           'array_agg(r.val), array_agg(r.ts)) FROM (%s) AS r '
                           'WHERE r.ts < $2 HAVING count(*) > 0', v_rows)
              USING v_def.id, v_cut;
        END IF;
        EXECUTE format($q$
        WITH marked AS (
            SELECT r.uuid, r.ts, r.val,
                   r.ts - lag(r.ts) OVER (PARTITION BY r.uuid COLLATE "C" ORDER BY r.ts)
                       > $1 AS brk
              FROM (%s) AS r
             WHERE $2::timestamptz IS NULL OR r.ts >= $2
        ), numbered AS (
            SELECT m.uuid, m.ts, m.val,
                   count(*) FILTER (WHERE m.brk)
                       OVER (PARTITION BY m.uuid COLLATE "C" ORDER BY m.ts) AS grp
              FROM marked m
        )
        SELECT array_agg(i.uuid), array_agg(i.s), array_agg(i.e), array_agg(i.n),
               array_agg(i.total), array_agg(i.vmin), array_agg(i.vmax)
          FROM (SELECT x.uuid, min(x.ts) AS s, max(x.ts) AS e, count(*) AS n,
                       sum(x.val) AS total, min(x.val) AS vmin, max(x.val) AS vmax
                  FROM numbered x GROUP BY x.uuid, x.grp) AS i$q$, v_rows)
          INTO v_uuid, v_s, v_e, v_n, v_total, v_vmin, v_vmax
         USING v_def.gap, v_cut;
        FOR v_lo IN 1 .. coalesce(cardinality(v_uuid), 0) BY c_slice LOOP
            PERFORM slidewin.sessions_apply(
                v_def.id, v_uuid[v_lo:v_lo + c_slice - 1], v_s[v_lo:v_lo + c_slice - 1],
                v_e[v_lo:v_lo + c_slice - 1], v_n[v_lo:v_lo + c_slice - 1],
                v_total[v_lo:v_lo + c_slice - 1], v_vmin[v_lo:v_lo + c_slice - 1],
                v_vmax[v_lo:v_lo + c_slice - 1]);
        END LOOP;
        UPDATE slidewin.session_defs  -- what keeping it cost, for slidewin.session_cost
           SET apply_seconds = apply_seconds
                               + extract(epoch FROM clock_timestamp() - v_began)::float8
         WHERE id = v_def.id;
    END LOOP;
    RETURN NULL;
END
$$;
