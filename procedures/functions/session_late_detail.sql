-- slidewin.session_late_detail(p_def, p_ts): the dead letter's sentence for an event late for a
-- session window -- the definition, the event time, the stream time it was judged against and
-- the grace -- shared by every writer (slidewin.sessions_late). p_def carries base_ts
-- (slidewin.session_begin).
DROP FUNCTION IF EXISTS slidewin.session_late_detail(
    slidewin.session_defs, timestamptz, timestamptz, timestamptz);
CREATE OR REPLACE FUNCTION slidewin.session_late_detail(
    p_def slidewin.session_defs, p_ts timestamptz)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT format('late for session window %s: ts %s is older than its stream time %s minus '
                  'grace %s; the event is stored, no session is changed',
                  p_def.name, p_ts, p_def.base_ts, p_def.grace)
$$;
