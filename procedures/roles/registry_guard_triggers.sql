-- the registry_guard trigger on each registry holding statements (slidewin.streams,
-- slidewin.joins). Created only where missing: CREATE TRIGGER locks the table against writes,
-- and `slidewin db init` runs while the ingest and the jobs write these rows.
DO $$
DECLARE
    v_table text;
BEGIN
    FOREACH v_table IN ARRAY ARRAY['streams', 'joins'] LOOP
        CONTINUE WHEN to_regclass('slidewin.' || v_table) IS NULL;
        CONTINUE WHEN EXISTS (SELECT FROM pg_trigger
                               WHERE tgrelid = to_regclass('slidewin.' || v_table)
                                 AND tgname = 'registry_guard');
        EXECUTE format('CREATE TRIGGER registry_guard BEFORE UPDATE ON slidewin.%I '
                       'FOR EACH ROW EXECUTE FUNCTION slidewin.registry_guard()', v_table);
    END LOOP;
END
$$;
