-- slidewin.hopping(p_size, p_advance, p_from, p_to): hopping windows [start, start + size), starts
-- aligned to the epoch at multiples of advance (Kafka Streams' TimeWindows, Spark's window()),
-- one row per window holding events, for every window starting in [p_from, p_to).
--
-- Each row: the window, count/sum/min/max/avg of its events, `final` (window_end <=
-- slidewin.complete_up_to(): no event the ingest can still accept falls in it) and `partial`
-- (retention has deleted events at or after its start: slidewin.retired_through()).
-- Cost: buckets + windows, never windows x size -- slidewin.hopping_series reads each stretch
-- between two window boundaries once, from the coarsest grain that fits, and computes every
-- window in one pass; tumbling windows (advance = size) are the buckets of the size
-- (slidewin.rollup_buckets). The work is bounded before anything is read
-- (slidewin.check_window_work).
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
    v_span  interval := make_interval(secs => v_size);
    v_first timestamptz;
    v_last  timestamptz;
    v_done  timestamptz := slidewin.complete_up_to();
    v_cut   timestamptz := slidewin.retired_through();
    v_msg   text;
BEGIN
    PERFORM slidewin.check_window_spec(v_size, v_adv);
    PERFORM slidewin.check_window_range(p_from, p_to, v_adv);
    -- the first start >= p_from and the last start < p_to
    v_first := slidewin.grain_floor(p_from - interval '1 microsecond', v_adv)
               + make_interval(secs => v_adv);
    v_last := slidewin.grain_floor(p_to - interval '1 microsecond', v_adv);
    IF v_first > v_last THEN
        RETURN;
    END IF;
    PERFORM slidewin.check_window_work(
        format('hopping windows of %ss every %ss', v_size, v_adv), v_size, v_adv,
        (extract(epoch FROM v_last - v_first) / v_adv)::bigint + 1,
        ARRAY[1] || slidewin.rollup_grains());
    IF v_adv = v_size THEN  -- tumbling: each bucket of the size is its window
        RETURN QUERY
        SELECT b.bucket, b.bucket + v_span, b.n, b.total, b.vmin, b.vmax,
               (b.total / b.n)::double precision,
               coalesce(b.bucket + v_span <= v_done, false), coalesce(b.bucket <= v_cut, false)
          FROM slidewin.rollup_buckets(v_size, v_first, v_last + v_span) AS b
         ORDER BY b.bucket;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT h.window_start, h.window_start + v_span, h.n, h.total, h.vmin, h.vmax,
           (h.total / h.n)::double precision,
           coalesce(h.window_start + v_span <= v_done, false),
           coalesce(h.window_start <= v_cut, false)
      FROM slidewin.hopping_series(NULL, v_size, v_adv, v_first, v_last) AS h
     ORDER BY h.window_start;
EXCEPTION WHEN query_canceled THEN  -- statement_timeout: said in words
    GET STACKED DIAGNOSTICS v_msg = MESSAGE_TEXT;
    PERFORM slidewin.window_timed_out('slidewin.hopping', v_msg);
    RAISE;
END
$$;
