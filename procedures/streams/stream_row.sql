-- slidewin.stream_row(name): any stream's registry row, the built-in `events` included, or an
-- error naming the stream (slidewin.stream_get is for what only a declared stream has: its shape
-- can change). With slidewin.stream_table it is the one way a feature reading any stream (a join)
-- finds the stream's table, key and time columns; its stream time is slidewin.stream_state's row
-- of the same name for every stream.
CREATE OR REPLACE FUNCTION slidewin.stream_row(p_name text)
RETURNS slidewin.streams
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_s slidewin.streams;
BEGIN
    SELECT * INTO v_s FROM slidewin.streams WHERE name = p_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no stream named %', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'undefined_object',
                  HINT = 'slidewin streams list shows the streams; slidewin streams add declares one';
    END IF;
    RETURN v_s;
END
$$;
