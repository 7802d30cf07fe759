-- slidewin.session_late_detail(p_def, p_first, p_last, p_close): the dead letter's sentence for
-- an event late for a session window -- the definition, its session, the close time -- shared
-- by the insert trigger and the ingest sink.
CREATE OR REPLACE FUNCTION slidewin.session_late_detail(
    p_def slidewin.session_defs, p_first timestamptz, p_last timestamptz, p_close timestamptz)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT format('late for session window %s (gap %s, grace %s): its session [%s, %s] ends '
                  'before the close time %s; the event is stored, the session is not changed',
                  p_def.name, p_def.gap, p_def.grace, p_first, p_last, p_close)
$$;
