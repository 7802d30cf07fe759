-- slidewin.rollup_range(p_from, p_to): count, sum, min, max of every retained event with
-- p_from <= ts < p_to (both whole seconds), exact, from the coarsest rollup rows that fit.
--
-- The range is cut into pieces: whole hours in the middle, whole minutes and 10 s buckets
-- around them, single seconds at the ends -- so an hour reads at most about
-- (2 x 9 + 2 x 5 + 59) x partitions rows, not 3,600 x partitions. Every grain is exact at every
-- commit (slidewin.rollups, slidewin.rollups_coarse), so the answer is too. The built-in stream's
-- range totals for slidewin.stream_buckets (step 0: slidewin.stream_summary, window_summary):
-- static SQL whose plan is kept, where a statement composed per call would cost more to plan
-- than the sub-millisecond answer itself.
CREATE OR REPLACE FUNCTION slidewin.rollup_range(p_from timestamptz, p_to timestamptz)
RETURNS TABLE (n bigint, total numeric, vmin bigint, vmax bigint)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_grains integer[] := ARRAY[1] || slidewin.rollup_grains();
    v_left   timestamptz := p_from;
    v_right  timestamptz := p_to;
    v_g      integer[] := '{}'::integer[];
    v_lo     timestamptz[] := '{}'::timestamptz[];
    v_hi     timestamptz[] := '{}'::timestamptz[];
    v_next   integer;
    v_a      timestamptz;
    v_b      timestamptz;
    i        integer := 1;
BEGIN
    IF p_from <> date_trunc('second', p_from, 'UTC') OR p_to <> date_trunc('second', p_to, 'UTC') THEN
        RAISE EXCEPTION 'rollup_range needs whole seconds, got % to %', p_from, p_to
            USING ERRCODE = 'invalid_parameter_value', HINT = 'truncate both ends to the second';
    END IF;
    WHILE i < cardinality(v_grains) LOOP  -- climb while a whole bucket of the next grain fits
        v_next := v_grains[i + 1];
        v_a := slidewin.grain_floor(v_left - interval '1 microsecond', v_next)
               + make_interval(secs => v_next);  -- first boundary >= v_left
        v_b := slidewin.grain_floor(v_right, v_next);
        EXIT WHEN v_a >= v_b;
        v_g := v_g || v_grains[i] || v_grains[i];
        v_lo := v_lo || v_left || v_b;
        v_hi := v_hi || v_a || v_right;
        v_left := v_a;
        v_right := v_b;
        i := i + 1;
    END LOOP;
    v_g := v_g || v_grains[i];
    v_lo := v_lo || v_left;
    v_hi := v_hi || v_right;
    RETURN QUERY
    SELECT coalesce(sum(x.n), 0)::bigint, sum(x.total), min(x.vmin), max(x.vmax)
      FROM (SELECT r.n, r.total, r.vmin, r.vmax
              FROM unnest(v_g, v_lo, v_hi) AS p(g, lo, hi)
              JOIN slidewin.rollups r ON r.sec >= p.lo AND r.sec < p.hi
             WHERE p.g = 1 AND p.lo < p.hi
            UNION ALL
            SELECT c.n, c.total, c.vmin, c.vmax
              FROM unnest(v_g, v_lo, v_hi) AS p(g, lo, hi)
              JOIN slidewin.rollups_coarse c
                ON c.grain = p.g AND c.bucket >= p.lo AND c.bucket < p.hi
             WHERE p.g > 1 AND p.lo < p.hi) AS x;
END
$$;
