-- slidewin.stream_rollups_on_truncate(): a truncate of a declared stream empties its rollups.
CREATE OR REPLACE FUNCTION slidewin.stream_rollups_on_truncate()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    EXECUTE format('TRUNCATE slidewin_rollups.%I, slidewin_rollups.%I', TG_ARGV[0],
                   TG_ARGV[0] || '#minute');
    RETURN NULL;
END
$$;
