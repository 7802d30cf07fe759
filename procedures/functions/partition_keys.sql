-- slidewin.partition_keys(): every partition number, for "run everywhere" callers
-- (VoltDB @GetPartitionKeys). Read at each round, so partitions added meanwhile are covered.
CREATE OR REPLACE FUNCTION slidewin.partition_keys()
RETURNS SETOF integer
LANGUAGE sql STABLE
ROWS 64  -- a handful, not the default 1000 (or millions via an unanalyzed config): keeps plans cheap
AS $$
    SELECT generate_series(0, c.partitions - 1) FROM slidewin.config c
$$;
