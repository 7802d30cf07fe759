-- slidewin.rollups_coarse: count, sum, min, max per (grain, bucket, partition) for the grains of
-- slidewin.rollup_grains() (10 s, 1 min, 1 h), so a window over an hour or a day reads a few
-- hundred rows instead of 3,600 x partitions per hour.
--
-- Invariant (promise 1, like slidewin.rollups): after every committed transaction each row
-- equals the aggregates of slidewin.events for that part and [bucket, bucket + grain); empty
-- buckets have no row. Kept by slidewin.rollups_add / rollups_subtract in the same statement as
-- the per-second rows, min/max included under deletes. Incremental tables, not materialized
-- views: a view is only as exact as its last refresh, these are exact at every commit.
CREATE TABLE IF NOT EXISTS slidewin.rollups_coarse (
    grain  integer     NOT NULL CHECK (grain IN (10, 60, 3600)),  -- slidewin.rollup_grains()
    bucket timestamptz NOT NULL,
    part   smallint    NOT NULL,
    n      bigint      NOT NULL CHECK (n >= 0),
    total  numeric     NOT NULL,
    vmin   bigint      NOT NULL,
    vmax   bigint      NOT NULL,
    PRIMARY KEY (grain, bucket, part),
    CHECK (bucket = slidewin.grain_floor(bucket, grain))
);
-- recomputing one bucket's min/max from the grain below reads one partition's range
CREATE INDEX IF NOT EXISTS rollups_coarse_part ON slidewin.rollups_coarse (grain, part, bucket);
-- a store made before this table existed gets it filled from its per-second rollups, once
INSERT INTO slidewin.rollups_coarse (grain, bucket, part, n, total, vmin, vmax)
SELECT g, slidewin.grain_floor(r.sec, g), r.part, sum(r.n), sum(r.total), min(r.vmin), max(r.vmax)
  FROM slidewin.rollups r CROSS JOIN unnest(slidewin.rollup_grains()) AS g
 WHERE NOT EXISTS (SELECT 1 FROM slidewin.rollups_coarse)
 GROUP BY 1, 2, 3;
