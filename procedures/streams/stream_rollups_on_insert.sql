-- slidewin.stream_rollups_on_insert(): AFTER INSERT statement trigger of a declared stream's
-- table (TG_ARGV[0]: its name): adds the inserted rows' aggregates to their seconds and minutes with the
-- statement slidewin.stream_rollup_sql generated, and signals channel slidewin_streams with the
-- stream's name. extra_float_digits = 1 makes a double's text its shortest round-trip form
-- whatever the caller's setting, so its exact decimal is always the same.
CREATE OR REPLACE FUNCTION slidewin.stream_rollups_on_insert()
RETURNS trigger
LANGUAGE plpgsql
SET extra_float_digits = 1
AS $$
DECLARE
    v_sql        text;
    v_minute_sql text;
BEGIN
    SELECT insert_sql, minute_insert_sql INTO STRICT v_sql, v_minute_sql
      FROM slidewin.streams WHERE name = TG_ARGV[0];
    EXECUTE v_sql;
    IF v_minute_sql IS NOT NULL THEN  -- a statement made before insert_sql did both grains
        EXECUTE v_minute_sql;
    END IF;
    PERFORM pg_notify('slidewin_streams', TG_ARGV[0]);
    RETURN NULL;
END
$$;
