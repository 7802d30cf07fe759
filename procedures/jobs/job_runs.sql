-- slidewin.job_runs: one row per scheduled job execution (a retention run is one or more rounds),
-- for `slidewin jobs status`: last run, rows deleted per partition, deletes/s.
-- Bounded: slidewin.record_job_run keeps the newest p_keep rows per job and prunes the rest.
CREATE TABLE IF NOT EXISTS slidewin.job_runs (
    id              bigserial PRIMARY KEY,
    job             text        NOT NULL,
    kind            text        NOT NULL CHECK (kind IN ('retention', 'refresh', 'stats')),
    started_at      timestamptz NOT NULL,
    finished_at     timestamptz NOT NULL CHECK (finished_at >= started_at),
    rounds          integer     NOT NULL DEFAULT 0 CHECK (rounds >= 0),
    deleted         bigint      NOT NULL DEFAULT 0 CHECK (deleted >= 0),
    deleted_by_part jsonb       NOT NULL DEFAULT '{}',
    caught_up       boolean,
    skipped         boolean     NOT NULL DEFAULT false,
    detail          jsonb       NOT NULL DEFAULT '{}',
    error           text
);
CREATE INDEX IF NOT EXISTS job_runs_job_id ON slidewin.job_runs (job, id);
