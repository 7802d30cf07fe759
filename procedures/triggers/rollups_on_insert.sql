-- slidewin.rollups_on_insert(): AFTER INSERT statement trigger on slidewin.events (and each
-- partition). Aggregates the statement's inserted rows (COPY and INSERT ... ON CONFLICT DO NOTHING
-- included: the transition table holds only rows really inserted) into slidewin.rollups.
--
-- It steps aside while the transaction-local setting slidewin.precomputed_rollups is 'on': the
-- ingest sets it around a COPY whose rollups Spark has computed, and adds them itself in the
-- same transaction (ingest.sink.apply_partials). Nothing else sets it; every other writer --
-- psql, the procedures, the sink's staging path -- goes through the aggregation below.
CREATE OR REPLACE FUNCTION slidewin.rollups_on_insert()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF current_setting('slidewin.precomputed_rollups', true) = 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM slidewin.rollups_add(array_agg(sec), array_agg(part), array_agg(n), array_agg(total),
                                 array_agg(vmin), array_agg(vmax))
    FROM (SELECT slidewin.grain_floor(ts, 1) AS sec, part, count(*) AS n,
                 sum(val) AS total, min(val) AS vmin, max(val) AS vmax
            FROM new_rows GROUP BY 1, 2) AS d
    HAVING count(*) > 0;
    RETURN NULL;
END
$$;
