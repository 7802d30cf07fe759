-- slidewin.window_work_limit(): the most work one window request may ask for, in buckets read
-- plus windows returned (slidewin.window_work): 1,000,000 -- a few seconds of work -- unless the
-- session sets slidewin.max_window_work (SET slidewin.max_window_work = 5000000).
CREATE OR REPLACE FUNCTION slidewin.window_work_limit()
RETURNS bigint
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(nullif(current_setting('slidewin.max_window_work', true), '')::bigint,
                    1000000)
$$;
