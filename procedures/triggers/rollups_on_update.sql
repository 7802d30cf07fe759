-- slidewin.rollups_on_update(): AFTER UPDATE statement trigger: an update is the old rows taken
-- out, then the new rows put in (a row moved to another partition included).
CREATE OR REPLACE FUNCTION slidewin.rollups_on_update()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM slidewin.rollups_subtract(array_agg(sec), array_agg(part), array_agg(n),
                                      array_agg(total), array_agg(vmin), array_agg(vmax))
    FROM (SELECT slidewin.grain_floor(ts, 1) AS sec, part, count(*) AS n,
                 sum(val) AS total, min(val) AS vmin, max(val) AS vmax
            FROM old_rows GROUP BY 1, 2) AS d
    HAVING count(*) > 0;
    PERFORM slidewin.rollups_add(array_agg(sec), array_agg(part), array_agg(n), array_agg(total),
                                 array_agg(vmin), array_agg(vmax))
    FROM (SELECT slidewin.grain_floor(ts, 1) AS sec, part, count(*) AS n,
                 sum(val) AS total, min(val) AS vmin, max(val) AS vmax
            FROM new_rows GROUP BY 1, 2) AS d
    HAVING count(*) > 0;
    RETURN NULL;
END
$$;
