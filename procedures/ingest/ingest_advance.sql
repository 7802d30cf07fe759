-- slidewin.ingest_advance(p_stream, p_newest_ts, p_now, p_grace): raise the stream's newest
-- event time to p_newest_ts (never lowers it) and its watermark to newest - grace (never lowers
-- it either), recording the ingest's grace when given (NULL keeps the stored one); returns the
-- newest event time. The watermark is what windows read (slidewin.complete_up_to): the ingest
-- rejects anything older as late. Called by the ingest sink inside its batch transaction, after
-- the rows are written (slidewin.stream_begin locked the row first).
DROP FUNCTION IF EXISTS slidewin.ingest_advance(text, timestamptz, timestamptz);
DO $$
BEGIN  -- version 1 named the first parameter p_query_id; a name cannot be changed in place
    IF EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = 'slidewin' AND p.proname = 'ingest_advance'
                  AND p.proargnames[1] = 'p_query_id') THEN
        DROP FUNCTION slidewin.ingest_advance(text, timestamptz, timestamptz, interval);
    END IF;
END
$$;
CREATE OR REPLACE FUNCTION slidewin.ingest_advance(
    p_stream text, p_newest_ts timestamptz, p_now timestamptz DEFAULT now(),
    p_grace interval DEFAULT NULL)
RETURNS timestamptz
LANGUAGE plpgsql
AS $$
DECLARE
    v_state slidewin.stream_state;
BEGIN
    IF p_grace < interval '0' THEN
        RAISE EXCEPTION 'p_grace must be 0 or more, got %', p_grace
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM slidewin.stream_begin(p_stream);
    SELECT * INTO v_state FROM slidewin.stream_state WHERE stream = p_stream;
    v_state.newest_ts := CASE WHEN v_state.newest_ts IS NULL THEN p_newest_ts
                              WHEN p_newest_ts IS NULL THEN v_state.newest_ts
                              ELSE greatest(v_state.newest_ts, p_newest_ts) END;
    v_state.grace := coalesce(p_grace, v_state.grace);
    -- greatest() ignores NULLs: no grace yet (rows written by hand) leaves the watermark alone
    v_state.watermark := greatest(v_state.watermark, v_state.newest_ts - v_state.grace);
    UPDATE slidewin.stream_state
       SET newest_ts = v_state.newest_ts, grace = v_state.grace, watermark = v_state.watermark,
           updated_at = p_now
     WHERE stream = p_stream;
    RETURN v_state.newest_ts;
END
$$;
