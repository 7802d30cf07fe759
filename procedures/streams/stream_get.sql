-- slidewin.stream_get(name): a declared stream's row, or an error naming the stream and how to
-- see the ones there are (the built-in stream events is not a declared stream): slidewin.stream_row's
-- row, for what only a declared stream has (its shape can change).
CREATE OR REPLACE FUNCTION slidewin.stream_get(p_name text)
RETURNS slidewin.streams
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_s slidewin.streams;
BEGIN
    v_s := slidewin.stream_row(p_name);  -- the row, or the error naming the stream
    IF v_s.builtin THEN
        RAISE EXCEPTION 'stream % is built in: its shape is fixed', p_name
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'declare a stream of your own with slidewin streams add';
    END IF;
    RETURN v_s;
END
$$;
