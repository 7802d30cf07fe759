-- slidewin.ingest_advance(p_query_id, p_newest_ts, p_now, p_grace): raise the stream's newest
-- event time to p_newest_ts (never lowers it: greatest() of old and new) and return the result;
-- record the ingest's grace when given (NULL keeps the stored one). newest - grace is the
-- watermark windows read (slidewin.complete_up_to): the ingest rejects anything older as late.
-- Called by the ingest sink inside its batch transaction, after the rows are written.
DROP FUNCTION IF EXISTS slidewin.ingest_advance(text, timestamptz, timestamptz);
CREATE OR REPLACE FUNCTION slidewin.ingest_advance(
    p_query_id text, p_newest_ts timestamptz, p_now timestamptz DEFAULT now(),
    p_grace interval DEFAULT NULL)
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
    IF p_grace < interval '0' THEN
        RAISE EXCEPTION 'p_grace must be 0 or more, got %', p_grace
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO slidewin.stream_state AS s (query_id, newest_ts, updated_at, grace)
    VALUES (p_query_id, p_newest_ts, p_now, p_grace)
    ON CONFLICT (query_id) DO UPDATE
       SET newest_ts = CASE WHEN s.newest_ts IS NULL THEN excluded.newest_ts
                            WHEN excluded.newest_ts IS NULL THEN s.newest_ts
                            ELSE greatest(s.newest_ts, excluded.newest_ts) END,
           updated_at = excluded.updated_at,
           grace = coalesce(excluded.grace, s.grace)
    RETURNING newest_ts INTO v_newest;
    RETURN v_newest;
END
$$;
