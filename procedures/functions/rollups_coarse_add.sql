-- slidewin.rollups_coarse_add(...): merge per-(second, partition) aggregates of inserted rows into
-- every coarse grain (slidewin.rollups_coarse). Called by slidewin.rollups_add, after the
-- per-second rows, with the same arrays. Rows are upserted in (grain, bucket, part) order, the
-- one lock order of every writer of this table (see rollups_add).
CREATE OR REPLACE FUNCTION slidewin.rollups_coarse_add(
    p_sec timestamptz[], p_part smallint[], p_n bigint[], p_total numeric[],
    p_vmin bigint[], p_vmax bigint[])
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO slidewin.rollups_coarse AS c (grain, bucket, part, n, total, vmin, vmax)
    SELECT g, slidewin.grain_floor(d.sec, g), d.part, sum(d.n), sum(d.total), min(d.vmin),
           max(d.vmax)
    FROM unnest(p_sec, p_part, p_n, p_total, p_vmin, p_vmax) AS d(sec, part, n, total, vmin, vmax)
    CROSS JOIN unnest(slidewin.rollup_grains()) AS g
    GROUP BY 1, 2, 3
    ORDER BY 1, 2, 3
    ON CONFLICT (grain, bucket, part) DO UPDATE
       SET n = c.n + excluded.n,
           total = c.total + excluded.total,
           vmin = least(c.vmin, excluded.vmin),
           vmax = greatest(c.vmax, excluded.vmax);
END
$$;
