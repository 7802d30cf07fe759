-- slidewin.stream_drop(name): remove a declared stream -- its table and partitions, rollups,
-- state, registry row and dead letters -- in one transaction. Returns the rows it held.
CREATE OR REPLACE FUNCTION slidewin.stream_drop(p_name text)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_s    slidewin.streams := slidewin.stream_get(p_name);
    v_rows bigint;
BEGIN
    IF EXISTS (SELECT 1 FROM slidewin.joins WHERE v_s.name IN (left_stream, right_stream)) THEN
        RAISE EXCEPTION 'stream % is joined by %', v_s.name,
            (SELECT string_agg(name, ', ' ORDER BY name) FROM slidewin.joins
              WHERE v_s.name IN (left_stream, right_stream))
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'drop its joins first (slidewin joins drop NAME --yes)';
    END IF;
    EXECUTE format('SELECT coalesce(sum(n), 0) FROM slidewin_rollups.%I', v_s.name) INTO v_rows;
    EXECUTE format('DROP TABLE slidewin_streams.%I', v_s.name);
    EXECUTE format('DROP TABLE slidewin_rollups.%I, slidewin_rollups.%I', v_s.name,
                   v_s.name || '#minute');
    DELETE FROM slidewin.stream_state WHERE stream = v_s.name;
    DELETE FROM slidewin.dead_letters WHERE stream = v_s.name;
    DELETE FROM slidewin.streams WHERE name = v_s.name;
    RETURN v_rows;
END
$$;
