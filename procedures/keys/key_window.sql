-- slidewin.key_window(p_key, p_kind, p_size, p_advance, p_from, p_to): the time windows of ONE
-- key -- p_kind 'tumbling' (p_advance ignored: the size), 'hopping' or 'sliding' (p_advance
-- ignored) -- with the columns and semantics of slidewin.tumbling / hopping / sliding: starts
-- aligned to the epoch, [start, start + size) for tumbling and hopping, seconds t - size through
-- t for sliding, `final` and `partial` from the store's watermark and retention cut. Only that
-- key's events are read (slidewin.key_buckets), so the cost is bounded by the key's events in
-- the range when the key index is on (slidewin.key_index); hopping and sliding series are one
-- pass over them (slidewin.hopping_series, slidewin.sliding_series), never windows x size.
CREATE OR REPLACE FUNCTION slidewin.key_window(
    p_key text, p_kind text, p_size interval, p_advance interval, p_from timestamptz,
    p_to timestamptz)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, total numeric,
               vmin bigint, vmax bigint, avg double precision, final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
DECLARE
    v_size  integer := slidewin.window_seconds('size', p_size);
    v_adv   integer;
    v_span  interval := make_interval(secs => v_size);
    v_first timestamptz;
    v_last  timestamptz;
    v_done  timestamptz := slidewin.complete_up_to();
    v_cut   timestamptz := slidewin.retired_through();
    v_msg   text;
BEGIN
    PERFORM slidewin.check_key(p_key);
    IF p_kind = 'sliding' THEN
        RETURN QUERY SELECT * FROM slidewin.sliding_series(p_key, p_size, p_from, p_to);
        RETURN;
    END IF;
    IF p_kind NOT IN ('tumbling', 'hopping') THEN
        RAISE EXCEPTION 'kind % is not a time window kind', coalesce(quote_literal(p_kind), 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use tumbling, hopping or sliding';
    END IF;
    v_adv := CASE WHEN p_kind = 'tumbling' THEN v_size
                  ELSE slidewin.window_seconds('advance', p_advance) END;
    PERFORM slidewin.check_window_spec(v_size, v_adv);
    PERFORM slidewin.check_window_range(p_from, p_to, v_adv);
    v_first := slidewin.grain_floor(p_from - interval '1 microsecond', v_adv)
               + make_interval(secs => v_adv);
    v_last := slidewin.grain_floor(p_to - interval '1 microsecond', v_adv);
    IF v_first > v_last THEN
        RETURN;
    END IF;
    -- the key's events summed per gcd(size, advance): the buckets of one grain
    PERFORM slidewin.check_window_work(
        format('%s windows of %ss every %ss for one key', p_kind, v_size, v_adv), v_size, v_adv,
        (extract(epoch FROM v_last - v_first) / v_adv)::bigint + 1,
        ARRAY[gcd(v_size, v_adv)]);
    IF v_adv = v_size THEN  -- tumbling: each bucket of the size is its window
        RETURN QUERY
        SELECT b.bucket, b.bucket + v_span, b.n, b.total, b.vmin, b.vmax,
               (b.total / b.n)::double precision,
               coalesce(b.bucket + v_span <= v_done, false), coalesce(b.bucket <= v_cut, false)
          FROM slidewin.key_buckets(p_key, v_size, v_first, v_last + v_span) AS b
         ORDER BY b.bucket;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT h.window_start, h.window_start + v_span, h.n, h.total, h.vmin, h.vmax,
           (h.total / h.n)::double precision,
           coalesce(h.window_start + v_span <= v_done, false),
           coalesce(h.window_start <= v_cut, false)
      FROM slidewin.hopping_series(p_key, v_size, v_adv, v_first, v_last) AS h
     ORDER BY h.window_start;
EXCEPTION WHEN query_canceled THEN  -- statement_timeout: said in words
    GET STACKED DIAGNOSTICS v_msg = MESSAGE_TEXT;
    PERFORM slidewin.window_timed_out('slidewin.key_window', v_msg);
    RAISE;
END
$$;
