-- slidewin.rollups_on_insert(): AFTER INSERT statement trigger on slidewin.events (and each
-- partition). Aggregates the statement's inserted rows (COPY and INSERT ... ON CONFLICT DO NOTHING
-- included: the transition table holds only rows really inserted) into slidewin.rollups.
CREATE OR REPLACE FUNCTION slidewin.rollups_on_insert()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM slidewin.rollups_add(array_agg(sec), array_agg(part), array_agg(n), array_agg(total),
                                 array_agg(vmin), array_agg(vmax))
    FROM (SELECT date_trunc('second', ts, 'UTC') AS sec, part, count(*) AS n,
                 sum(val) AS total, min(val) AS vmin, max(val) AS vmax
            FROM new_rows GROUP BY 1, 2) AS d
    HAVING count(*) > 0;
    RETURN NULL;
END
$$;
