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
    ELSE
        DELETE FROM slidewin.rollups
         WHERE part = (SELECT k FROM slidewin.partition_keys() AS k
                        WHERE slidewin.partition_name(k) = TG_TABLE_NAME);
        DELETE FROM slidewin.rollups_coarse
         WHERE part = (SELECT k FROM slidewin.partition_keys() AS k
                        WHERE slidewin.partition_name(k) = TG_TABLE_NAME);
    END IF;
    PERFORM pg_notify('slidewin_rollups', 'delete');  -- see rollups_subtract
    RETURN NULL;
END
$$;
