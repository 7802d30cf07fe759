-- slidewin.stream_get(name): a declared stream's row, or an error naming the stream and how to
-- see the ones there are (the built-in stream events is not a declared stream).
CREATE OR REPLACE FUNCTION slidewin.stream_get(p_name text)
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
    IF v_s.builtin THEN
        RAISE EXCEPTION 'stream % is built in: its shape is fixed', p_name
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'declare a stream of your own with slidewin streams add';
    END IF;
    RETURN v_s;
END
$$;
