-- slidewin.retention_targets(p_max_rows, p_split): per-partition row targets for a global row
-- limit, with each partition's current row count (from the exact rollups).
--
-- Contract: one row per partition (slidewin.partition_keys()); the targets sum to p_max_rows
-- whenever the store holds more than p_max_rows rows (else each target is the partition's rows:
-- nothing to delete).
--   * 'even'   : VoltDB's split, p_max_rows / partitions each, the remainder spread one row each
--                over the lowest partition numbers (VoltDB drops it).
--   * 'global' : keep the newest p_max_rows rows of the whole store. Walking the rollups from the
--                newest second back, the boundary second S is the oldest one still (partly) kept;
--                each partition keeps all its rows newer than S plus a share of its rows in S,
--                the share proportional to its rows there (largest remainder, ties by partition).
--                So the rows deleted are the globally oldest, to within one second, whatever the
--                key skew -- where the even split deletes a hot partition's new rows while a cold
--                one keeps old rows.
-- Cost: reads the rollups (seconds x partitions rows), never the raw table.
CREATE OR REPLACE FUNCTION slidewin.retention_targets(p_max_rows bigint, p_split text DEFAULT 'global')
RETURNS TABLE (part integer, n_rows bigint, target_rows bigint)
LANGUAGE plpgsql STABLE
-- partition_keys() is estimated at millions of rows (config is never analyzed), which makes the
-- planner JIT-compile this tiny query: 0.5 s instead of 1 ms.
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
    IF p_max_rows IS NULL OR p_max_rows <= 0 THEN
        RAISE EXCEPTION 'p_max_rows must be > 0, got %', coalesce(p_max_rows::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'a row limit of 0 would empty the table; give the rows to keep';
    END IF;
    IF p_split IS NULL OR p_split NOT IN ('global', 'even') THEN
        RAISE EXCEPTION 'p_split must be ''global'' or ''even'', got %', coalesce(p_split, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    WITH keys AS (
        SELECT k::integer AS part, count(*) OVER () AS parts FROM slidewin.partition_keys() AS k
    ), per_sec AS (
        SELECT r.sec, sum(r.n)::bigint AS n FROM slidewin.rollups r GROUP BY r.sec
    ), cum AS (
        SELECT s.sec, s.n, (sum(s.n) OVER (ORDER BY s.sec DESC))::bigint - s.n AS newer
          FROM per_sec s
    ), split_at AS (
        SELECT c.sec, least(p_max_rows - c.newer, c.n) AS share, c.n AS n_at
          FROM cum c WHERE c.newer < p_max_rows ORDER BY c.sec LIMIT 1
    ), per_part AS (
        SELECT k.part, k.parts,
               coalesce(sum(r.n), 0)::bigint AS n_rows,
               coalesce(sum(r.n) FILTER (WHERE r.sec > s.sec), 0)::bigint AS above,
               coalesce(sum(r.n) FILTER (WHERE r.sec = s.sec), 0)::bigint AS at_n
          FROM keys k
          LEFT JOIN split_at s ON true
          LEFT JOIN slidewin.rollups r ON r.part = k.part
         GROUP BY k.part, k.parts
    ), alloc AS (
        SELECT p.*, (s.share * p.at_n) / s.n_at AS base, (s.share * p.at_n) % s.n_at AS frac,
               s.share
          FROM per_part p LEFT JOIN split_at s ON true
    ), ranked AS (
        SELECT a.*, row_number() OVER (ORDER BY a.frac DESC NULLS LAST, a.part) AS rank,
               a.share - sum(a.base) OVER () AS leftover
          FROM alloc a
    )
    SELECT r.part, r.n_rows,
           CASE WHEN p_split = 'even'
                THEN p_max_rows / r.parts + (r.part < p_max_rows % r.parts)::integer
                ELSE r.above + coalesce(r.base, 0) + (r.rank <= coalesce(r.leftover, 0))::integer
           END::bigint
      FROM ranked r
     ORDER BY r.part;
END
$$;
