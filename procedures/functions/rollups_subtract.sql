-- slidewin.rollups_subtract(...): take deleted rows out of the rollups -- the one routine every
-- delete path goes through (promise 1).
--
-- Algorithm: lock the affected rollup rows in (sec, part) order; subtract count and sum; drop
-- seconds left empty; recompute min/max only for seconds whose extreme was among the deleted rows,
-- from that one second of that one partition (index range on the primary key) -- bounded work;
-- then the same for the coarse grains (slidewin.rollups_coarse_subtract), from the exact seconds.
-- The lock is taken by its own statement so that, under READ COMMITTED, the statements after it
-- see every concurrent insert that committed into those seconds while we waited.
-- Signals channel 'slidewin_rollups' with payload 'delete' (see rollups_add), only when a second
-- emptied or lost an extreme: a delete that changes only counts and sums cannot move a max.
CREATE OR REPLACE FUNCTION slidewin.rollups_subtract(
    p_sec timestamptz[], p_part smallint[], p_n bigint[], p_total numeric[],
    p_vmin bigint[], p_vmax bigint[])
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_zero_sec  timestamptz[];
    v_zero_part smallint[];
    v_fix_sec   timestamptz[];
    v_fix_part  smallint[];
BEGIN
    PERFORM 1
    FROM slidewin.rollups r
    JOIN unnest(p_sec, p_part) AS z(sec, part) ON r.sec = z.sec AND r.part = z.part
    ORDER BY r.sec, r.part
    FOR UPDATE OF r;

    WITH upd AS (
        UPDATE slidewin.rollups r
           SET n = r.n - d.n, total = r.total - d.total
          FROM unnest(p_sec, p_part, p_n, p_total, p_vmin, p_vmax) AS d(sec, part, n, total, vmin, vmax)
         WHERE r.sec = d.sec AND r.part = d.part
        RETURNING r.sec, r.part, r.n AS left_n, (d.vmin <= r.vmin OR d.vmax >= r.vmax) AS lost_extreme
    )
    SELECT array_agg(sec) FILTER (WHERE left_n = 0),
           array_agg(part) FILTER (WHERE left_n = 0),
           array_agg(sec) FILTER (WHERE left_n > 0 AND lost_extreme),
           array_agg(part) FILTER (WHERE left_n > 0 AND lost_extreme)
      INTO v_zero_sec, v_zero_part, v_fix_sec, v_fix_part
      FROM upd;

    IF v_zero_sec IS NOT NULL THEN
        DELETE FROM slidewin.rollups r
         USING unnest(v_zero_sec, v_zero_part) AS z(sec, part)
         WHERE r.sec = z.sec AND r.part = z.part;
    END IF;

    IF v_fix_sec IS NOT NULL THEN
        UPDATE slidewin.rollups r
           SET vmin = m.vmin, vmax = m.vmax
          FROM unnest(v_fix_sec, v_fix_part) AS z(sec, part)
          CROSS JOIN LATERAL (
                SELECT min(e.val) AS vmin, max(e.val) AS vmax
                  FROM slidewin.events e
                 WHERE e.part = z.part AND e.ts >= z.sec AND e.ts < z.sec + interval '1 second'
          ) AS m
         WHERE r.sec = z.sec AND r.part = z.part;
    END IF;
    PERFORM slidewin.rollups_coarse_subtract(p_sec, p_part, p_n, p_total, p_vmin, p_vmax);
    IF v_zero_sec IS NOT NULL OR v_fix_sec IS NOT NULL THEN
        PERFORM pg_notify('slidewin_rollups', 'delete');
    END IF;
END
$$;
