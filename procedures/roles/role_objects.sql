-- slidewin.role_objects(tables): the tables named (in schema slidewin) with every partition of
-- each, as regclass: the ingest COPYs straight into the partitions of slidewin.events, and a
-- grant on a partitioned table does not reach its partitions.
CREATE OR REPLACE FUNCTION slidewin.role_objects(p_tables text[])
RETURNS SETOF regclass
LANGUAGE sql
STABLE
AS $$
    SELECT r.rel
      FROM unnest(p_tables) AS n(name)
      CROSS JOIN LATERAL (SELECT to_regclass('slidewin.' || quote_ident(n.name))) AS t(rel)
      CROSS JOIN LATERAL (SELECT t.rel
                          UNION
                          SELECT relid FROM pg_partition_tree(t.rel)) AS r(rel)
     WHERE t.rel IS NOT NULL;
$$;
