-- slidewin.check_chunk(p_chunk): raise invalid_parameter_value unless 1 <= p_chunk <= 1000000.
-- The owner of the chunk cap in SQL (db/limits.py MAX_CHUNK in Python; the two must agree).
CREATE OR REPLACE FUNCTION slidewin.check_chunk(p_chunk integer)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF p_chunk IS NULL OR p_chunk <= 0 OR p_chunk > 1000000 THEN
        RAISE EXCEPTION 'p_chunk must be from 1 to 1000000 rows, got %', coalesce(p_chunk::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'pass the most rows one call may delete, e.g. 100';
    END IF;
END
$$;
