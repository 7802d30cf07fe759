-- slidewin.rollups_on_delete(): AFTER DELETE statement trigger on slidewin.events (and each
-- partition). Every delete -- nibble, inline nibble, or a manual DELETE in psql -- reaches the
-- rollups through slidewin.rollups_subtract.
CREATE OR REPLACE FUNCTION slidewin.rollups_on_delete()
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
    RETURN NULL;
END
$$;
