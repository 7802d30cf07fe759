-- slidewin.rollups_seconds: count, sum, min, max of the retained raw rows per second over every
-- partition -- slidewin.rollups summed across its partitions -- so a series at one-second
-- resolution (sliding windows) reads one row per second instead of one per (second, partition).
--
-- Invariant (promise 1, like slidewin.rollups): after every committed transaction each row
-- equals the aggregates of slidewin.events for [sec, sec + 1 s); seconds with no rows have no
-- row. Kept by slidewin.rollups_seconds_add / rollups_seconds_subtract, called by rollups_add and
-- rollups_subtract in the same statement as the per-partition rows, min/max included under
-- deletes (recomputed from the second's per-partition rows).
CREATE TABLE IF NOT EXISTS slidewin.rollups_seconds (
    sec   timestamptz PRIMARY KEY CHECK (sec = date_trunc('second', sec, 'UTC')),
    n     bigint      NOT NULL CHECK (n >= 0),
    total numeric     NOT NULL,
    vmin  bigint      NOT NULL,
    vmax  bigint      NOT NULL
);
-- a store made before this table existed gets it filled from its per-second rollups, once
INSERT INTO slidewin.rollups_seconds (sec, n, total, vmin, vmax)
SELECT r.sec, sum(r.n), sum(r.total), min(r.vmin), max(r.vmax)
  FROM slidewin.rollups r
 WHERE NOT EXISTS (SELECT 1 FROM slidewin.rollups_seconds)
 GROUP BY r.sec;
