-- slidewin.stream_measure_type(columns, measure, key, time): the type of a column that may be a
-- measure (bigint, integer, double precision or numeric, and neither key nor time), or an error
-- naming the column and the fix.
CREATE OR REPLACE FUNCTION slidewin.stream_measure_type(
    p_columns jsonb, p_measure text, p_key text, p_time text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_t text;
BEGIN
    SELECT c->>'type' INTO v_t FROM jsonb_array_elements(p_columns) c WHERE c->>'name' = p_measure;
    IF v_t IS NULL THEN
        RAISE EXCEPTION 'measure % is not a column of the stream', coalesce(p_measure, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'declare the column first, or name one of the stream''s columns';
    END IF;
    IF p_measure IN (p_key, p_time)
       OR NOT (v_t IN ('bigint', 'integer', 'double precision') OR v_t LIKE 'numeric%') THEN
        RAISE EXCEPTION 'column % (%) cannot be a measure', p_measure, v_t
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'a measure is a bigint, integer, double precision or numeric column '
                         'other than the key and the time';
    END IF;
    RETURN v_t;
END
$$;
