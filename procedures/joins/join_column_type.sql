-- slidewin.join_column_type(stream, column, what): the declared type of a stream's column, or an
-- error naming the join's parameter, the column and the columns there are.
CREATE OR REPLACE FUNCTION slidewin.join_column_type(p_stream slidewin.streams, p_column text,
                                                     p_what text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_t text;
BEGIN
    SELECT c->>'type' INTO v_t FROM jsonb_array_elements(p_stream.columns) c
     WHERE c->>'name' = p_column;
    IF v_t IS NULL THEN
        RAISE EXCEPTION '%: stream % has no column %', p_what, p_stream.name,
                        coalesce(quote_literal(p_column), 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('its columns are %s',
                                (SELECT string_agg(c->>'name', ', ')
                                   FROM jsonb_array_elements(p_stream.columns) c));
    END IF;
    RETURN v_t;
END
$$;
