-- slidewin.stream_sliding(stream, measure, size, from, to): the moving window ending at each
-- second t that holds events, t in [from, to), over seconds t - size through t (both ends
-- inclusive), as slidewin.sliding for the built-in stream; columns as slidewin.stream_hopping.
CREATE OR REPLACE FUNCTION slidewin.stream_sliding(
    p_stream text, p_measure text, p_size interval, p_from timestamptz, p_to timestamptz,
    p_key text DEFAULT NULL)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, cnt bigint,
               total numeric, vmin numeric, vmax numeric, avg double precision,
               final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET extra_float_digits = 1  -- a double's min and max as its shortest round-trip decimal
SET max_parallel_workers_per_gather = 0
AS $$
DECLARE
    v_size  integer := slidewin.window_seconds('size', p_size);
    v_span  interval := make_interval(secs => v_size);
    v_state record := slidewin.stream_window_state(p_stream, v_size, v_size);
BEGIN
    PERFORM slidewin.check_window_range(p_from, p_to, 1);
    RETURN QUERY
    SELECT w.sec - v_span, w.sec, w.n::bigint, w.cnt::bigint,
           CASE WHEN w.cnt > 0 THEN slidewin.stream_total(w.total, w.nan::bigint,
                                                          w.pinf::bigint, w.ninf::bigint) END,
           w.vmin, w.vmax,
           (slidewin.stream_total(w.total, w.nan::bigint, w.pinf::bigint, w.ninf::bigint)
            / nullif(w.cnt, 0))::double precision,
           coalesce(w.sec + interval '1 second' <= v_state.watermark, false),
           coalesce(w.sec - v_span <= v_state.retired_through, false)
      FROM (SELECT b.bucket AS sec, sum(b.n) OVER f AS n, sum(b.cnt) OVER f AS cnt,
                   sum(b.total) OVER f AS total,
                   coalesce(min(b.vmin) OVER f, (min(b.fmin) OVER f)::text::numeric) AS vmin,
                   coalesce(max(b.vmax) OVER f, (max(b.fmax) OVER f)::text::numeric) AS vmax,
                   sum(b.nan) OVER f AS nan,
                   sum(b.pinf) OVER f AS pinf, sum(b.ninf) OVER f AS ninf
              FROM slidewin.stream_buckets(p_stream, p_measure, 1, p_from - v_span, p_to, p_key) AS b
            WINDOW f AS (ORDER BY b.bucket RANGE BETWEEN v_span PRECEDING AND CURRENT ROW)) AS w
     WHERE w.sec >= p_from
     ORDER BY w.sec;
END
$$;
