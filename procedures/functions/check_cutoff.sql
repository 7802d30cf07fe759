-- slidewin.check_cutoff(p_cutoff): raise invalid_parameter_value when the retention cutoff is NULL
-- (a NULL cutoff would delete nothing and say nothing).
CREATE OR REPLACE FUNCTION slidewin.check_cutoff(p_cutoff timestamptz)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_cutoff IS NULL THEN
        RAISE EXCEPTION 'p_cutoff must be a timestamp, got NULL'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'e.g. now() - interval ''30 seconds''';
    END IF;
END
$$;
