-- slidewin.key_window(p_key, p_kind, p_size, p_advance, p_from, p_to): the time windows of ONE
-- key of the built-in stream events -- p_kind 'tumbling' (p_advance ignored: the size),
-- 'hopping' or 'sliding' (p_advance ignored) -- with the columns and semantics of
-- slidewin.tumbling / hopping / sliding: starts aligned to the epoch, [start, start + size) for
-- tumbling and hopping, seconds t - size through t for sliding, `final` and `partial` from the
-- store's watermark and retention cut. slidewin.stream_hopping / stream_sliding with the key:
-- only that key's events are read, from the one partition holding it (along the key index when
-- it is on: slidewin.key_index), one pass over them, never windows x size.
CREATE OR REPLACE FUNCTION slidewin.key_window(
    p_key text, p_kind text, p_size interval, p_advance interval, p_from timestamptz,
    p_to timestamptz)
RETURNS TABLE (window_start timestamptz, window_end timestamptz, n bigint, total numeric,
               vmin bigint, vmax bigint, avg double precision, final boolean, partial boolean)
LANGUAGE plpgsql STABLE
SET slidewin.window_name = 'slidewin.key_window'  -- a timeout inside names this function
AS $$
BEGIN
    PERFORM slidewin.check_key(p_key);
    IF p_kind IS NULL OR p_kind NOT IN ('tumbling', 'hopping', 'sliding') THEN
        RAISE EXCEPTION 'kind % is not a time window kind', coalesce(quote_literal(p_kind), 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use tumbling, hopping or sliding';
    END IF;
    IF p_kind = 'sliding' THEN
        RETURN QUERY
        SELECT h.window_start, h.window_end, h.n, h.total, h.vmin::bigint, h.vmax::bigint,
               h.avg, h.final, h.partial
          FROM slidewin.stream_sliding('events', 'val', p_size, p_from, p_to, p_key) AS h;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT h.window_start, h.window_end, h.n, h.total, h.vmin::bigint, h.vmax::bigint, h.avg,
           h.final, h.partial
      FROM slidewin.stream_hopping('events', 'val', p_size,
                                   CASE WHEN p_kind = 'hopping' THEN p_advance ELSE p_size END,
                                   p_from, p_to, p_key) AS h;
END
$$;
