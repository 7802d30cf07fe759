-- slidewin.key_index_status(stream): which streams have their key index (slidewin.key_index) --
-- every stream, by name, or p_stream alone (an error naming it when there is no such stream).
-- Reads the catalog only, so a reader (`slidewin serve`) may ask.
CREATE OR REPLACE FUNCTION slidewin.key_index_status(p_stream text DEFAULT NULL)
RETURNS TABLE (stream text, key_index boolean)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF p_stream IS NOT NULL THEN
        PERFORM slidewin.stream_row(p_stream);  -- the error naming a stream that is not there
    END IF;
    RETURN QUERY
    SELECT s.name, to_regclass(format('%I.%I', i.schema_name, i.index_name)) IS NOT NULL
      FROM slidewin.streams s CROSS JOIN LATERAL slidewin.key_index_name(s.name) AS i
     WHERE p_stream IS NULL OR s.name = p_stream
     ORDER BY s.name;
END
$$;
