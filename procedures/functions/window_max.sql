-- slidewin.window_max(p_seconds, p_now): largest val over the last p_seconds, from the rollups'
-- exact per-second max. NULL when the window holds no rows.
CREATE OR REPLACE FUNCTION slidewin.window_max(p_seconds integer, p_now timestamptz DEFAULT now())
RETURNS bigint
LANGUAGE sql STABLE
AS $$
    SELECT w.vmax FROM slidewin.window_summary(p_seconds, p_now) AS w
$$;
