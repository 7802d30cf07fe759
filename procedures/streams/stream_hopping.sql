-- slidewin.stream_hopping(stream, measure, size, advance, from, to): hopping windows over one
-- measure of a declared stream, with the semantics of slidewin.hopping (starts aligned to the
-- epoch at multiples of advance, [start, start + size), one row per window holding events, every
-- window starting in [from, to)). Each row: rows n, values cnt, total (what sum() over the raw
-- values gives: exact for integers and numeric; for doubles the exact sum of their decimals,
-- NaN/Infinity as sum() would say; NULL when no value), min, max, avg, final, partial.
-- measure may be NULL when the stream has one; p_key: the windows of that key alone, from its
-- own rows (slidewin.stream_buckets). Cost: buckets + windows, never windows x size -- one pass
-- over the buckets (slidewin.stream_hopping_series); tumbling windows are the buckets of the
-- size. The work is bounded before anything is read (slidewin.check_window_work).
CREATE OR REPLACE FUNCTION slidewin.stream_hopping(
    p_stream text, p_measure text, p_size interval, p_advance interval,
    p_from timestamptz, p_to timestamptz, p_key text DEFAULT NULL)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, cnt bigint,
               total numeric, vmin numeric, vmax numeric, avg double precision,
               final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET extra_float_digits = 1  -- a double's min and max as its shortest round-trip decimal
SET max_parallel_workers_per_gather = 0
AS $$
DECLARE
    v_size  integer := slidewin.window_seconds('size', p_size);
    v_adv   integer := slidewin.window_seconds('advance', p_advance);
    v_step  integer := gcd(v_size, v_adv);
    v_state record := slidewin.stream_window_state(p_stream, v_size, v_adv);
    v_first timestamptz;
    v_last  timestamptz;
    v_end   timestamptz;
    v_msg   text;
BEGIN
    IF p_key IS NOT NULL AND (slidewin.stream_row(p_stream)).builtin THEN
        PERFORM slidewin.check_key(p_key);  -- a key no event of the built-in stream can have
    END IF;
    PERFORM slidewin.check_window_range(p_from, p_to, v_adv);
    v_first := slidewin.grain_floor(p_from - interval '1 microsecond', v_adv)
               + make_interval(secs => v_adv);
    v_last := slidewin.grain_floor(p_to - interval '1 microsecond', v_adv);
    IF v_first > v_last THEN
        RETURN;
    END IF;
    v_end := v_last + make_interval(secs => v_size);
    PERFORM slidewin.check_window_work(
        format('hopping windows of %ss every %ss%s', v_size, v_adv,
               CASE WHEN p_key IS NOT NULL THEN ' for one key' ELSE '' END),
        v_size, v_adv, (extract(epoch FROM v_last - v_first) / v_adv)::bigint + 1,
        CASE WHEN p_key IS NULL THEN slidewin.stream_grains(p_stream) ELSE ARRAY[v_step] END);
    IF v_adv = v_size THEN  -- tumbling: each bucket is a window
        RETURN QUERY
        SELECT b.bucket, b.bucket + make_interval(secs => v_size), b.n, b.cnt,
               CASE WHEN b.cnt > 0 THEN slidewin.stream_total(b.total, b.nan, b.pinf, b.ninf)
               END,
               coalesce(b.vmin, b.fmin::text::numeric), coalesce(b.vmax, b.fmax::text::numeric),
               (slidewin.stream_total(b.total, b.nan, b.pinf, b.ninf)
                / nullif(b.cnt, 0))::double precision,
               coalesce(b.bucket + make_interval(secs => v_size) <= v_state.watermark, false),
               coalesce(b.bucket <= v_state.retired_through, false)
          FROM slidewin.stream_buckets(p_stream, p_measure, v_size, v_first, v_end, p_key) AS b
         WHERE b.bucket >= p_from AND b.bucket < p_to
         ORDER BY b.bucket;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT h.window_start, h.window_start + make_interval(secs => v_size), h.n, h.cnt, h.total,
           h.vmin, h.vmax, h.avg,
           coalesce(h.window_start + make_interval(secs => v_size) <= v_state.watermark, false),
           coalesce(h.window_start <= v_state.retired_through, false)
      FROM slidewin.stream_hopping_series(p_stream, p_measure, v_size, v_adv, v_first, v_last,
                                          p_key) AS h
     ORDER BY h.window_start;
EXCEPTION WHEN query_canceled THEN  -- statement_timeout: said in words
    GET STACKED DIAGNOSTICS v_msg = MESSAGE_TEXT;
    PERFORM slidewin.window_timed_out('slidewin.stream_hopping', v_msg);
    RAISE;
END
$$;
