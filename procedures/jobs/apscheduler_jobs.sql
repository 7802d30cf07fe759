-- slidewin.apscheduler_jobs: APScheduler 3.x's SQLAlchemy job store (the same columns it would
-- create), made here so the schema owns it and two schedulers starting at once don't race to
-- create it. Jobs survive scheduler restarts because they live in this table.
--   id            : the job's name (`slidewin jobs add ... --name`)
--   next_run_time : epoch seconds; NULL while the job is paused
--   job_state     : the pickled job (a module-level function reference and plain kwargs)
CREATE TABLE IF NOT EXISTS slidewin.apscheduler_jobs (
    id            varchar(191) PRIMARY KEY,
    next_run_time double precision,
    job_state     bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS apscheduler_jobs_next_run_time
    ON slidewin.apscheduler_jobs (next_run_time);
