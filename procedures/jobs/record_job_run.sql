-- slidewin.record_job_run(...): record one job execution and prune that job's old records.
--
-- Contract: inserts one slidewin.job_runs row and deletes that job's rows older than its newest
-- p_keep (so the table stays bounded however long the scheduler runs). Returns the new row's id.
-- Counts the run in slidewin.counters (job_runs by kind and outcome), which the pruning leaves
-- alone. Cost: one insert, one counter upsert and an index range delete of, in the steady state,
-- one row.
CREATE OR REPLACE FUNCTION slidewin.record_job_run(
    p_job text, p_kind text, p_started_at timestamptz, p_finished_at timestamptz,
    p_rounds integer, p_deleted_by_part jsonb, p_caught_up boolean, p_skipped boolean,
    p_detail jsonb DEFAULT '{}', p_error text DEFAULT NULL, p_keep integer DEFAULT 1000)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_id     bigint;
    v_oldest bigint;
BEGIN
    IF p_keep IS NULL OR p_keep < 1 THEN
        RAISE EXCEPTION 'p_keep must be >= 1, got %', coalesce(p_keep::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO slidewin.job_runs (job, kind, started_at, finished_at, rounds, deleted,
                                   deleted_by_part, caught_up, skipped, detail, error)
    VALUES (p_job, p_kind, p_started_at, p_finished_at, coalesce(p_rounds, 0),
            coalesce((SELECT sum(value::bigint) FROM jsonb_each_text(p_deleted_by_part)), 0),
            coalesce(p_deleted_by_part, '{}'), p_caught_up, coalesce(p_skipped, false),
            coalesce(p_detail, '{}'), p_error)
    RETURNING id INTO v_id;
    PERFORM slidewin.counter_add('job_runs', jsonb_build_object(
        'kind', p_kind, 'outcome', slidewin.job_outcome(p_error, p_skipped)), 1);
    SELECT r.id INTO v_oldest FROM slidewin.job_runs r
     WHERE r.job = p_job ORDER BY r.id DESC OFFSET p_keep LIMIT 1;
    IF v_oldest IS NOT NULL THEN
        DELETE FROM slidewin.job_runs r WHERE r.job = p_job AND r.id <= v_oldest;
    END IF;
    RETURN v_id;
END
$$;
