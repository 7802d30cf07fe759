-- slidewin.check_key(p_key): refuse a key no event can have (events' uuid is 1-200 characters).
CREATE OR REPLACE FUNCTION slidewin.check_key(p_key text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_key IS NULL OR length(p_key) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'key must be 1 to 200 characters, got %',
            coalesce(length(p_key)::text || ' characters', 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'pass the uuid of the events, e.g. key-000042';
    END IF;
END
$$;
