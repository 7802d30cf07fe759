-- slidewin.rollup_buckets(p_grain, p_from, p_to): count, sum, min, max over all partitions per
-- bucket of p_grain seconds (aligned to the epoch) for buckets in [p_from, p_to) that hold
-- events; both ends aligned to p_grain. Read from the coarsest stored grain dividing p_grain:
-- 10 s buckets from the 10 s rows, minutes from minutes, 30 s from 10 s, 45 s from seconds.
CREATE OR REPLACE FUNCTION slidewin.rollup_buckets(
    p_grain integer, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (bucket timestamptz, n bigint, total numeric, vmin bigint, vmax bigint)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_src integer := (SELECT max(g) FROM unnest(ARRAY[1] || slidewin.rollup_grains()) AS g
                       WHERE p_grain % g = 0);
BEGIN
    IF v_src = 1 THEN
        RETURN QUERY
        SELECT slidewin.grain_floor(r.sec, p_grain), sum(r.n)::bigint, sum(r.total), min(r.vmin),
               max(r.vmax)
          FROM slidewin.rollups r
         WHERE r.sec >= p_from AND r.sec < p_to
         GROUP BY 1;
    ELSIF v_src = p_grain THEN
        RETURN QUERY
        SELECT c.bucket, sum(c.n)::bigint, sum(c.total), min(c.vmin), max(c.vmax)
          FROM slidewin.rollups_coarse c
         WHERE c.grain = v_src AND c.bucket >= p_from AND c.bucket < p_to
         GROUP BY 1;
    ELSE
        RETURN QUERY
        SELECT slidewin.grain_floor(c.bucket, p_grain), sum(c.n)::bigint, sum(c.total),
               min(c.vmin), max(c.vmax)
          FROM slidewin.rollups_coarse c
         WHERE c.grain = v_src AND c.bucket >= p_from AND c.bucket < p_to
         GROUP BY 1;
    END IF;
END
$$;
