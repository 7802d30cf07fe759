-- slidewin.key_windows_at(p_key, p_size, p_advance, p_at): Faust's lookups for ONE key -- every
-- hopping window [start, start + size) holding p_at, oldest first, with the key's aggregates
-- (n = 0 for a window without its events); current() is the last row, delta(d) the last row
-- for p_at - d. Reads the key's events of one 2 x size-long range (slidewin.key_buckets), all
-- windows in one pass over them (slidewin.hopping_series).
CREATE OR REPLACE FUNCTION slidewin.key_windows_at(
    p_key text, p_size interval, p_advance interval, p_at timestamptz)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, total numeric,
               vmin bigint, vmax bigint, avg double precision, final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
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
    PERFORM slidewin.check_key(p_key);
    PERFORM slidewin.check_window_spec(v_size, v_adv);
    IF p_at IS NULL THEN
        RAISE EXCEPTION 'at is missing (no events yet for stream time?)'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'give a time, e.g. now()';
    END IF;
    v_first := slidewin.grain_floor(p_at - v_span, v_adv) + make_interval(secs => v_adv);
    v_last := slidewin.grain_floor(p_at, v_adv);
    PERFORM slidewin.check_window_work(
        format('hopping windows of %ss every %ss holding one time for one key', v_size, v_adv),
        v_size, v_adv, (extract(epoch FROM v_last - v_first) / v_adv)::bigint + 1,
        ARRAY[gcd(v_size, v_adv)], 'advance');
    RETURN QUERY
    SELECT h.window_start, h.window_start + v_span, h.n, h.total, h.vmin, h.vmax,
           (h.total / nullif(h.n, 0))::double precision,
           coalesce(h.window_start + v_span <= v_done, false),
           coalesce(h.window_start <= v_cut, false)
      FROM slidewin.hopping_series(p_key, v_size, v_adv, v_first, v_last, true) AS h
     ORDER BY h.window_start;
EXCEPTION WHEN query_canceled THEN  -- statement_timeout: said in words
    GET STACKED DIAGNOSTICS v_msg = MESSAGE_TEXT;
    PERFORM slidewin.window_timed_out('slidewin.key_windows_at', v_msg);
    RAISE;
END
$$;
