-- slidewin.job_outcome(error, skipped): a job run's outcome as /metrics counts it -- error,
-- skipped or ok.
CREATE OR REPLACE FUNCTION slidewin.job_outcome(p_error text, p_skipped boolean)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE WHEN p_error IS NOT NULL THEN 'error'
                WHEN coalesce(p_skipped, false) THEN 'skipped'
                ELSE 'ok' END;
$$;
