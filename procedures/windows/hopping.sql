-- slidewin.hopping(p_size, p_advance, p_from, p_to): hopping windows [start, start + size), starts
-- aligned to the epoch at multiples of advance (Kafka Streams' TimeWindows, Spark's window()),
-- one row per window holding events, for every window starting in [p_from, p_to).
--
-- Each row: the window, count/sum/min/max/avg of its events, `final` (window_end <=
-- slidewin.complete_up_to(): no event the ingest can still accept falls in it) and `partial`
-- (retention has deleted events at or after its start: slidewin.retired_through()).
-- Read from buckets of gcd(size, advance) seconds (slidewin.rollup_buckets), each added to the
-- size/advance windows holding it: cost grows with the range asked, never with the table.
CREATE OR REPLACE FUNCTION slidewin.hopping(
    p_size interval, p_advance interval, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, total numeric,
               vmin bigint, vmax bigint, avg double precision, final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0  -- sub-millisecond work: starting workers costs more
AS $$
DECLARE
    v_size  integer := slidewin.window_seconds('size', p_size);
    v_adv   integer := slidewin.window_seconds('advance', p_advance);
    v_step  integer := gcd(v_size, v_adv);
    v_first timestamptz;
    v_end   timestamptz;
    v_done  timestamptz := slidewin.complete_up_to();
    v_cut   timestamptz := slidewin.retired_through();
BEGIN
    PERFORM slidewin.check_window_spec(v_size, v_adv);
    PERFORM slidewin.check_window_range(p_from, p_to, v_adv);
    -- the first start >= p_from, and the end of the last window starting before p_to
    v_first := slidewin.grain_floor(p_from - interval '1 microsecond', v_adv)
               + make_interval(secs => v_adv);
    v_end := slidewin.grain_floor(p_to - interval '1 microsecond', v_adv)
             + make_interval(secs => v_size);
    RETURN QUERY
    SELECT s.ws, s.ws + make_interval(secs => v_size), sum(b.n)::bigint, sum(b.total),
           min(b.vmin), max(b.vmax), (sum(b.total) / sum(b.n))::double precision,
           coalesce(s.ws + make_interval(secs => v_size) <= v_done, false),
           coalesce(s.ws <= v_cut, false)
      FROM slidewin.rollup_buckets(v_step, v_first, v_end) AS b
     CROSS JOIN LATERAL generate_series(
               -- the windows holding bucket b: starts in (b - size, b], multiples of advance
               slidewin.grain_floor(b.bucket - make_interval(secs => v_size - v_step)
                                    - interval '1 microsecond', v_adv)
               + make_interval(secs => v_adv),
               slidewin.grain_floor(b.bucket, v_adv),
               make_interval(secs => v_adv)) AS s(ws)
     WHERE s.ws >= p_from AND s.ws < p_to
     GROUP BY s.ws
     ORDER BY s.ws;
END
$$;
