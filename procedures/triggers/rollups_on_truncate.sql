-- slidewin.rollups_on_truncate(): AFTER TRUNCATE statement trigger: truncating the parent empties
-- every rollup; truncating one partition empties that partition's rollups.
CREATE OR REPLACE FUNCTION slidewin.rollups_on_truncate()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_TABLE_NAME = 'events' THEN
        DELETE FROM slidewin.rollups;
        DELETE FROM slidewin.rollups_coarse;
        DELETE FROM slidewin.rollups_seconds;
    ELSE
        DELETE FROM slidewin.rollups
         WHERE part = (SELECT k FROM slidewin.partition_keys() AS k
                        WHERE slidewin.partition_name(k) = TG_TABLE_NAME);
        DELETE FROM slidewin.rollups_coarse
         WHERE part = (SELECT k FROM slidewin.partition_keys() AS k
                        WHERE slidewin.partition_name(k) = TG_TABLE_NAME);
        -- the all-partition seconds again from the partitions left (a truncate reads them all)
        DELETE FROM slidewin.rollups_seconds;
        INSERT INTO slidewin.rollups_seconds (sec, n, total, vmin, vmax)
        SELECT r.sec, sum(r.n), sum(r.total), min(r.vmin), max(r.vmax)
          FROM slidewin.rollups r GROUP BY r.sec;
    END IF;
    PERFORM pg_notify('slidewin_rollups', 'delete');  -- see rollups_subtract
    RETURN NULL;
END
$$;
