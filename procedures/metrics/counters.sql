-- slidewin.counters: totals that only ever grow, for /metrics (`slidewin serve`), kept where the
-- ingest, the jobs and the clients -- separate processes -- all write: in the store, raised in
-- the same transaction as what they count. Only what no other table can give is kept here:
--   dead_letters       {stream, reason}  rows inserted into slidewin.dead_letters (dropping a
--                                        stream deletes its dead letters; the count stays)
--   job_runs           {kind, outcome}   runs recorded by slidewin.record_job_run, which keeps
--                                        only the newest runs of each job
--   retention_deleted  {stream[, part]}  events deleted by slidewin.nibble (one row per
--                                        partition: parallel nibbles never wait for each other
--                                        here) and slidewin.stream_nibble
-- Events accepted, duplicates, rejections and batches come from slidewin.ingest_batches, which
-- nothing trims. `slidewin db reset` empties this table with the data (a counter reset, as a
-- process restart is to Prometheus).
DO $$
BEGIN
    IF to_regclass('slidewin.counters') IS NULL THEN
        CREATE TABLE slidewin.counters (
            name   text   NOT NULL CHECK (name ~ '^[a-z_]{1,60}$'),
            labels jsonb  NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(labels) = 'object'),
            value  bigint NOT NULL DEFAULT 0 CHECK (value >= 0),
            PRIMARY KEY (name, labels)
        );
        -- a store made before the counters starts them from what its tables still hold
        INSERT INTO slidewin.counters (name, labels, value)
        SELECT 'dead_letters',
               jsonb_build_object('stream', d.stream, 'reason', d.reason),
               count(*)
          FROM slidewin.dead_letters d GROUP BY 2;
        INSERT INTO slidewin.counters (name, labels, value)
        SELECT 'job_runs', jsonb_build_object('kind', r.kind, 'outcome', slidewin.job_outcome(
                   r.error, r.skipped)), count(*)
          FROM slidewin.job_runs r GROUP BY 2;
    END IF;
END
$$;
