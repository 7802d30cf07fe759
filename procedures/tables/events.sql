-- slidewin.events: the raw sliding window, LIST-partitioned on part = slidewin.partition_of(uuid).
--
-- Identity is (uuid, ts) as in VoltDB; the primary key (part, ts, uuid) enforces it within a
-- partition AND serves the nibbles' "oldest first" scan (ORDER BY ts, uuid) -- one index, two jobs.
-- There is no index on val: max comes from slidewin.rollups, which keeps it exact under deletes.
-- Partitions are created by slidewin.ensure_partitions(); rollups are kept by statement triggers.
CREATE TABLE IF NOT EXISTS slidewin.events (
    part smallint    NOT NULL,
    uuid text        NOT NULL CHECK (length(uuid) BETWEEN 1 AND 200),
    val  bigint      NOT NULL,
    ts   timestamptz NOT NULL,
    PRIMARY KEY (part, ts, uuid)
) PARTITION BY LIST (part);
