-- slidewin.registry_regenerate(): generate again every statement the registries hold (each
-- declared stream's rollup statements, slidewin.stream_rollup_sql; each join's statements,
-- slidewin.join_sql) from the definitions, and store them. Run by `slidewin db init`: a store
-- whose ingest or jobs role could rewrite them (before the column grants and the
-- registry_guard trigger) gets back the statements its definitions make, whatever was written
-- there. Returns the streams and joins regenerated. The owner's (it updates *_sql columns).
CREATE OR REPLACE FUNCTION slidewin.registry_regenerate()
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    v_name  text;
    v_count integer := 0;
BEGIN
    FOR v_name IN SELECT name FROM slidewin.streams WHERE NOT builtin ORDER BY name LOOP
        PERFORM slidewin.stream_rollup_sql(v_name);
        v_count := v_count + 1;
    END LOOP;
    FOR v_name IN SELECT name FROM slidewin.joins ORDER BY name LOOP
        PERFORM slidewin.join_sql(v_name);
        v_count := v_count + 1;
    END LOOP;
    RETURN v_count;
END
$$;
