-- slidewin.rollups_coarse_subtract(...): take deleted rows out of every coarse grain. Called by
-- slidewin.rollups_subtract after the per-second rows are corrected, with the same arrays.
--
-- Algorithm (the per-second one, a grain up): lock the affected buckets in (grain, bucket, part)
-- order; subtract count and sum; drop buckets left empty; then, grain by grain from the finest,
-- recompute min/max only for buckets whose extreme was among the deleted rows, from the grain
-- below (at most 60 rows of one partition: 10 seconds, 6 ten-second buckets, 60 minutes) --
-- bounded work, and exact because the grain below is already exact when it is read.
CREATE OR REPLACE FUNCTION slidewin.rollups_coarse_subtract(
    p_sec timestamptz[], p_part smallint[], p_n bigint[], p_total numeric[],
    p_vmin bigint[], p_vmax bigint[])
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_grains    integer[] := slidewin.rollup_grains();
    v_g  integer[];  v_b  timestamptz[];  v_p  smallint[];
    v_n  bigint[];   v_t  numeric[];      v_lo bigint[];  v_hi bigint[];
    v_zero_grain integer[];
    v_zero_bkt   timestamptz[];
    v_zero_part  smallint[];
    v_fix_grain  integer[];
    v_fix_bkt    timestamptz[];
    v_fix_part   smallint[];
    v_finer      integer := 1;
    g            integer;
BEGIN
    SELECT array_agg(s.g ORDER BY s.g, s.b, s.part), array_agg(s.b ORDER BY s.g, s.b, s.part),
           array_agg(s.part ORDER BY s.g, s.b, s.part), array_agg(s.n ORDER BY s.g, s.b, s.part),
           array_agg(s.total ORDER BY s.g, s.b, s.part), array_agg(s.vmin ORDER BY s.g, s.b, s.part),
           array_agg(s.vmax ORDER BY s.g, s.b, s.part)
      INTO v_g, v_b, v_p, v_n, v_t, v_lo, v_hi
      FROM (SELECT gr AS g, slidewin.grain_floor(d.sec, gr) AS b, d.part, sum(d.n) AS n,
                   sum(d.total) AS total, min(d.vmin) AS vmin, max(d.vmax) AS vmax
              FROM unnest(p_sec, p_part, p_n, p_total, p_vmin, p_vmax)
                   AS d(sec, part, n, total, vmin, vmax)
             CROSS JOIN unnest(v_grains) AS gr
             GROUP BY 1, 2, 3) AS s;
    IF v_g IS NULL THEN
        RETURN;
    END IF;

    PERFORM 1
    FROM slidewin.rollups_coarse c
    JOIN unnest(v_g, v_b, v_p) AS z(grain, bucket, part)
      ON c.grain = z.grain AND c.bucket = z.bucket AND c.part = z.part
    ORDER BY c.grain, c.bucket, c.part
    FOR UPDATE OF c;

    WITH upd AS (
        UPDATE slidewin.rollups_coarse c
           SET n = c.n - z.n, total = c.total - z.total
          FROM unnest(v_g, v_b, v_p, v_n, v_t, v_lo, v_hi)
               AS z(grain, bucket, part, n, total, vmin, vmax)
         WHERE c.grain = z.grain AND c.bucket = z.bucket AND c.part = z.part
        RETURNING c.grain, c.bucket, c.part, c.n AS left_n,
                  (z.vmin <= c.vmin OR z.vmax >= c.vmax) AS lost_extreme
    )
    SELECT array_agg(grain) FILTER (WHERE left_n = 0),
           array_agg(bucket) FILTER (WHERE left_n = 0),
           array_agg(part) FILTER (WHERE left_n = 0),
           array_agg(grain) FILTER (WHERE left_n > 0 AND lost_extreme),
           array_agg(bucket) FILTER (WHERE left_n > 0 AND lost_extreme),
           array_agg(part) FILTER (WHERE left_n > 0 AND lost_extreme)
      INTO v_zero_grain, v_zero_bkt, v_zero_part, v_fix_grain, v_fix_bkt, v_fix_part
      FROM upd;

    IF v_zero_grain IS NOT NULL THEN
        DELETE FROM slidewin.rollups_coarse c
         USING unnest(v_zero_grain, v_zero_bkt, v_zero_part) AS z(grain, bucket, part)
         WHERE c.grain = z.grain AND c.bucket = z.bucket AND c.part = z.part;
    END IF;

    IF v_fix_grain IS NULL THEN
        RETURN;
    END IF;
    FOREACH g IN ARRAY v_grains LOOP
        IF v_finer = 1 THEN
            UPDATE slidewin.rollups_coarse c
               SET vmin = m.vmin, vmax = m.vmax
              FROM unnest(v_fix_grain, v_fix_bkt, v_fix_part) AS z(grain, bucket, part)
              CROSS JOIN LATERAL (
                    SELECT min(r.vmin) AS vmin, max(r.vmax) AS vmax
                      FROM slidewin.rollups r
                     WHERE r.part = z.part AND r.sec >= z.bucket
                       AND r.sec < z.bucket + make_interval(secs => g)
              ) AS m
             WHERE z.grain = g AND c.grain = g AND c.bucket = z.bucket AND c.part = z.part;
        ELSE
            UPDATE slidewin.rollups_coarse c
               SET vmin = m.vmin, vmax = m.vmax
              FROM unnest(v_fix_grain, v_fix_bkt, v_fix_part) AS z(grain, bucket, part)
              CROSS JOIN LATERAL (
                    SELECT min(f.vmin) AS vmin, max(f.vmax) AS vmax
                      FROM slidewin.rollups_coarse f
                     WHERE f.grain = v_finer AND f.part = z.part AND f.bucket >= z.bucket
                       AND f.bucket < z.bucket + make_interval(secs => g)
              ) AS m
             WHERE z.grain = g AND c.grain = g AND c.bucket = z.bucket AND c.part = z.part;
        END IF;
        v_finer := g;
    END LOOP;
END
$$;
