-- slidewin.window_summary(p_seconds, p_now): count, sum, min, max, avg over the last p_seconds
-- of the built-in stream events.
--
-- Contract: the window is the p_seconds whole seconds ending with the one p_now falls in,
-- [trunc(p_now) - (p_seconds - 1) s, trunc(p_now) + 1 s), read from the rollups only, from the
-- coarsest grain that fits (slidewin.stream_summary, slidewin.stream_pieces) -- a few hundred
-- rows for an hour, whatever the size of the raw table (promise 5).
-- p_now defaults to the wall clock; pass slidewin.stream_time() for the newest event time.
-- A NULL p_now (no events yet) or an empty window gives n = 0 and NULL aggregates.
CREATE OR REPLACE FUNCTION slidewin.window_summary(p_seconds integer, p_now timestamptz DEFAULT now())
RETURNS TABLE (n bigint, total numeric, vmin bigint, vmax bigint, avg double precision)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_end timestamptz := date_trunc('second', p_now, 'UTC');
BEGIN
    PERFORM slidewin.check_window(p_seconds);
    RETURN QUERY
    SELECT w.n, w.total, w.vmin::bigint, w.vmax::bigint, w.avg
      FROM slidewin.stream_summary('events', 'val', v_end - make_interval(secs => p_seconds - 1),
                                   v_end + interval '1 second') AS w;
END
$$;
