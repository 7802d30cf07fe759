-- slidewin.window_avg(p_seconds, p_now): average val over the last p_seconds (see window_summary
-- for the window's bounds). NULL when the window holds no rows.
CREATE OR REPLACE FUNCTION slidewin.window_avg(p_seconds integer, p_now timestamptz DEFAULT now())
RETURNS double precision
LANGUAGE sql STABLE
AS $$
    SELECT w.avg FROM slidewin.window_summary(p_seconds, p_now) AS w
$$;
