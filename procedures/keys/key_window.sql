-- slidewin.key_window(p_key, p_kind, p_size, p_advance, p_from, p_to): the time windows of ONE
-- key -- p_kind 'tumbling' (p_advance ignored: the size), 'hopping' or 'sliding' (p_advance
-- ignored) -- with the columns and semantics of slidewin.tumbling / hopping / sliding: starts
-- aligned to the epoch, [start, start + size) for tumbling and hopping, seconds t - size through
-- t for sliding, `final` and `partial` from the store's watermark and retention cut. Only that
-- key's events are read (slidewin.key_buckets), so the cost is bounded by the key's events in
-- the range when the key index is on (slidewin.key_index).
CREATE OR REPLACE FUNCTION slidewin.key_window(
    p_key text, p_kind text, p_size interval, p_advance interval, p_from timestamptz,
    p_to timestamptz)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, total numeric,
               vmin bigint, vmax bigint, avg double precision, final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET max_parallel_workers_per_gather = 0
AS $$
DECLARE
    v_size integer := slidewin.window_seconds('size', p_size);
    v_adv  integer;
    v_span interval := make_interval(secs => v_size);
    v_done timestamptz := slidewin.complete_up_to();
    v_cut  timestamptz := slidewin.retired_through();
BEGIN
    PERFORM slidewin.check_key(p_key);
    IF p_kind = 'sliding' THEN
        PERFORM slidewin.check_window_spec(v_size, v_size);
        PERFORM slidewin.check_window_range(p_from, p_to, 1);
        RETURN QUERY
        SELECT w.bucket - v_span, w.bucket, w.n::bigint, w.total, w.vmin, w.vmax,
               (w.total / w.n)::double precision,
               coalesce(w.bucket + interval '1 second' <= v_done, false),
               coalesce(w.bucket - v_span <= v_cut, false)
          FROM (SELECT b.bucket, sum(b.n) OVER f AS n, sum(b.total) OVER f AS total,
                       min(b.vmin) OVER f AS vmin, max(b.vmax) OVER f AS vmax
                  FROM slidewin.key_buckets(p_key, 1, p_from - v_span, p_to) AS b
                WINDOW f AS (ORDER BY b.bucket RANGE BETWEEN v_span PRECEDING AND CURRENT ROW)) AS w
         WHERE w.bucket >= p_from
         ORDER BY w.bucket;
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
    IF v_adv = v_size THEN  -- tumbling: each bucket of the size is its window
        RETURN QUERY
        SELECT b.bucket, b.bucket + v_span, b.n, b.total, b.vmin, b.vmax,
               (b.total / b.n)::double precision,
               coalesce(b.bucket + v_span <= v_done, false), coalesce(b.bucket <= v_cut, false)
          FROM slidewin.key_buckets(
                   p_key, v_size,
                   slidewin.grain_floor(p_from - interval '1 microsecond', v_size) + v_span,
                   slidewin.grain_floor(p_to - interval '1 microsecond', v_size) + v_span) AS b
         ORDER BY b.bucket;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT s.ws, s.ws + v_span, sum(b.n)::bigint, sum(b.total), min(b.vmin), max(b.vmax),
           (sum(b.total) / sum(b.n))::double precision,
           coalesce(s.ws + v_span <= v_done, false), coalesce(s.ws <= v_cut, false)
      FROM slidewin.key_buckets(
               p_key, gcd(v_size, v_adv),
               slidewin.grain_floor(p_from - interval '1 microsecond', v_adv)
               + make_interval(secs => v_adv),
               slidewin.grain_floor(p_to - interval '1 microsecond', v_adv) + v_span) AS b
     CROSS JOIN LATERAL generate_series(
               slidewin.grain_floor(b.bucket - make_interval(secs => v_size - gcd(v_size, v_adv))
                                    - interval '1 microsecond', v_adv)
               + make_interval(secs => v_adv),
               slidewin.grain_floor(b.bucket, v_adv),
               make_interval(secs => v_adv)) AS s(ws)
     WHERE s.ws >= p_from AND s.ws < p_to
     GROUP BY s.ws
     ORDER BY s.ws;
END
$$;
