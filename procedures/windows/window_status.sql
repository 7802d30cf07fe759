-- slidewin.window_status(p_from, p_to): how complete an answer over [p_from, p_to) is --
-- stream_time (newest second holding events), complete_up_to (the watermark: windows ending at
-- or before it are final), retired_through (windows starting at or before it are partial) and
-- late: the built-in stream's events the ingest rejected as `late` whose event time lies in the
-- range (they never reached any window). Reads one index range of the dead letters' late
-- events. Events late only for a session definition (source `session:NAME`) are stored and
-- counted, so they are left out.
CREATE OR REPLACE FUNCTION slidewin.window_status(p_from timestamptz, p_to timestamptz)
RETURNS TABLE (stream_time timestamptz, complete_up_to timestamptz, retired_through timestamptz,
               late bigint)
LANGUAGE sql STABLE
AS $$
    SELECT slidewin.stream_time(), slidewin.complete_up_to(), slidewin.retired_through(),
           (SELECT count(*) FROM slidewin.dead_letters d
             WHERE d.reason = 'late' AND d.stream = 'events'
               AND d.event_ts >= p_from AND d.event_ts < p_to
               AND d.source NOT LIKE 'session:%')
$$;
