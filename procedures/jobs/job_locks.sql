-- slidewin.job_locks: the single-flight locks of the jobs, one row per lock (`retention`: one
-- retention round at a time in this database). A session holds a lock while holder_pid is its
-- backend's pid (slidewin.job_lock_take, slidewin.job_lock_release); a holder whose backend has
-- ended holds nothing. Only the jobs role (and the owner) may update the row, so no reader can
-- hold a lock -- an advisory lock, which any login can take, let a reader stop retention.
CREATE TABLE IF NOT EXISTS slidewin.job_locks (
    name       text PRIMARY KEY,
    holder_pid integer,
    held_since timestamptz
);
INSERT INTO slidewin.job_locks (name) VALUES ('retention') ON CONFLICT (name) DO NOTHING;
