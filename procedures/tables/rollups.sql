-- slidewin.rollups: count, sum, min, max of the retained raw rows, per (second, partition).
--
-- Invariant (promise 1): after every committed transaction each row equals the aggregates of
-- slidewin.events for that part and [sec, sec + 1 s); seconds with no rows have no rollup row.
-- Only the triggers on slidewin.events write here (rollups_on_insert/delete/update/truncate).
-- The primary key leads with sec so window queries read a contiguous range of seconds.
CREATE TABLE IF NOT EXISTS slidewin.rollups (
    sec   timestamptz NOT NULL CHECK (sec = date_trunc('second', sec, 'UTC')),
    part  smallint    NOT NULL,
    n     bigint      NOT NULL CHECK (n >= 0),
    total numeric     NOT NULL,
    vmin  bigint      NOT NULL,
    vmax  bigint      NOT NULL,
    PRIMARY KEY (sec, part)
);
-- per-partition row counts (delete_oldest_to_target) and status read by partition
CREATE INDEX IF NOT EXISTS rollups_part_sec ON slidewin.rollups (part, sec);
