-- slidewin.check_target_rows(p_target_rows): raise invalid_parameter_value unless p_target_rows >= 0.
CREATE OR REPLACE FUNCTION slidewin.check_target_rows(p_target_rows bigint)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_target_rows IS NULL OR p_target_rows < 0 THEN
        RAISE EXCEPTION 'p_target_rows must be >= 0, got %', coalesce(p_target_rows::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'the rows to keep in the partition, e.g. 10000';
    END IF;
END
$$;
