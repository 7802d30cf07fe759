-- slidewin.stream_windows_at(stream, measure, size, advance, at, key): Faust's lookups -- every
-- hopping window [start, start + size) (starts multiples of advance, aligned to the epoch) that
-- holds the time p_at, oldest first, with the columns of slidewin.stream_hopping; windows without
-- rows give n = 0 (of one key's rows alone with p_key). Faust's current() is the last row,
-- delta(d) the last row for p_at - d. All the windows in one pass over one 2 x size-long range
-- (slidewin.stream_hopping_series), their work bounded first (slidewin.check_window_work).
CREATE OR REPLACE FUNCTION slidewin.stream_windows_at(
    p_stream text, p_measure text, p_size interval, p_advance interval, p_at timestamptz,
    p_key text DEFAULT NULL)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, cnt bigint,
               total numeric, vmin numeric, vmax numeric, avg double precision,
               final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0  -- sub-millisecond work: starting workers costs more
AS $$
DECLARE
    v_size  integer := slidewin.window_seconds('size', p_size);
    v_adv   integer := slidewin.window_seconds('advance', p_advance);
    v_span  interval := make_interval(secs => v_size);
    v_state record := slidewin.stream_window_state(p_stream, v_size, v_adv);
    v_first timestamptz;
    v_last  timestamptz;
    v_msg   text;
BEGIN
    IF p_key IS NOT NULL AND (slidewin.stream_row(p_stream)).builtin THEN
        PERFORM slidewin.check_key(p_key);  -- a key no event of the built-in stream can have
    END IF;
    IF p_at IS NULL THEN
        RAISE EXCEPTION 'at is missing (no events yet for stream time?)'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'give a time, e.g. now()';
    END IF;
    v_first := slidewin.grain_floor(p_at - v_span, v_adv) + make_interval(secs => v_adv);
    v_last := slidewin.grain_floor(p_at, v_adv);
    PERFORM slidewin.check_window_work(
        format('hopping windows of %ss every %ss holding one time%s', v_size, v_adv,
               CASE WHEN p_key IS NOT NULL THEN ' for one key' ELSE '' END),
        v_size, v_adv, (extract(epoch FROM v_last - v_first) / v_adv)::bigint + 1,
        CASE WHEN p_key IS NULL THEN slidewin.stream_grains(p_stream)
             ELSE ARRAY[gcd(v_size, v_adv)] END, 'advance');
    RETURN QUERY
    SELECT h.window_start, h.window_start + v_span, h.n, h.cnt, h.total, h.vmin, h.vmax, h.avg,
           coalesce(h.window_start + v_span <= v_state.watermark, false),
           coalesce(h.window_start <= v_state.retired_through, false)
      FROM slidewin.stream_hopping_series(p_stream, p_measure, v_size, v_adv, v_first, v_last,
                                          p_key, true) AS h
     ORDER BY h.window_start;
EXCEPTION WHEN query_canceled THEN  -- statement_timeout: said in words
    GET STACKED DIAGNOSTICS v_msg = MESSAGE_TEXT;
    PERFORM slidewin.window_timed_out('slidewin.stream_windows_at', v_msg);
    RAISE;
END
$$;
