-- slidewin.ingest_advance(p_query_id, p_newest_ts, p_now): raise the stream's newest event time
-- to p_newest_ts (never lowers it: greatest() of old and new) and return the result.
-- Called by the ingest sink inside its batch transaction, after the rows are written.
CREATE OR REPLACE FUNCTION slidewin.ingest_advance(
    p_query_id text, p_newest_ts timestamptz, p_now timestamptz DEFAULT now())
RETURNS timestamptz
LANGUAGE plpgsql
AS $$
DECLARE
    v_newest timestamptz;
BEGIN
    IF p_query_id IS NULL OR length(p_query_id) NOT BETWEEN 1 AND 200 THEN
        RAISE EXCEPTION 'p_query_id must be 1..200 characters, got %', coalesce(p_query_id, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO slidewin.stream_state AS s (query_id, newest_ts, updated_at)
    VALUES (p_query_id, p_newest_ts, p_now)
    ON CONFLICT (query_id) DO UPDATE
       SET newest_ts = CASE WHEN s.newest_ts IS NULL THEN excluded.newest_ts
                            WHEN excluded.newest_ts IS NULL THEN s.newest_ts
                            ELSE greatest(s.newest_ts, excluded.newest_ts) END,
           updated_at = excluded.updated_at
    RETURNING newest_ts INTO v_newest;
    RETURN v_newest;
END
$$;
