-- slidewin.check_window(p_seconds): raise invalid_parameter_value unless 1 <= p_seconds <= 86400.
CREATE OR REPLACE FUNCTION slidewin.check_window(p_seconds integer)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_seconds IS NULL OR p_seconds <= 0 OR p_seconds > 86400 THEN
        RAISE EXCEPTION 'p_seconds must be from 1 to 86400, got %', coalesce(p_seconds::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
