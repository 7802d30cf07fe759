-- slidewin.stream_drop(name): remove a declared stream -- its table and partitions, rollups,
-- state, registry row and dead letters -- in one transaction. Returns the rows it held.
-- Refused while a join reads it or a session window definition in force keeps its sessions
-- (each error names them and the fix): dropping either with the stream would lose what a user
-- defined apart from it. The stream's row is locked first, so a definition being added
-- (slidewin.session_define) is either seen here or refused there.
CREATE OR REPLACE FUNCTION slidewin.stream_drop(p_name text)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_s    slidewin.streams := slidewin.stream_get(p_name);
    v_rows bigint;
BEGIN
    PERFORM 1 FROM slidewin.streams WHERE name = v_s.name FOR UPDATE;
    IF EXISTS (SELECT 1 FROM slidewin.session_defs
                WHERE stream = v_s.name AND dropped_at IS NULL) THEN
        RAISE EXCEPTION 'stream % has session windows: %', v_s.name,
            (SELECT string_agg(name, ', ' ORDER BY name) FROM slidewin.session_defs
              WHERE stream = v_s.name AND dropped_at IS NULL)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'remove them first (slidewin windows remove NAME)';
    END IF;
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
