-- slidewin.stream_begin(p_stream): lock the stream's state row for the rest of the transaction
-- (creating it when new) and return what a batch is classified against: the newest event time
-- committed before it and the watermark (both NULL before the first batch). Called by the
-- ingest sink first thing in each batch transaction.
CREATE OR REPLACE FUNCTION slidewin.stream_begin(p_stream text)
RETURNS TABLE (newest_ts timestamptz, watermark timestamptz)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
BEGIN
    IF p_stream IS NULL OR length(p_stream) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'p_stream must be 1..200 characters, got %', coalesce(p_stream, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO slidewin.stream_state (stream) VALUES (p_stream) ON CONFLICT DO NOTHING;
    RETURN QUERY
    SELECT s.newest_ts, s.watermark FROM slidewin.stream_state s
     WHERE s.stream = p_stream FOR UPDATE;
END
$$;
