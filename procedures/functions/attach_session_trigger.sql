-- slidewin.attach_session_trigger(p_table, p_stream): put the session trigger on one table of
-- stream p_stream (the parent or a partition: statement triggers with transition tables fire
-- only for the table a statement names, so each carries it, as each carries the rollup
-- triggers). The trigger names a declared stream (slidewin.sessions_on_insert's argument);
-- events' carries none, as it always has. Idempotent.
DROP FUNCTION IF EXISTS slidewin.attach_session_trigger(regclass);
CREATE OR REPLACE FUNCTION slidewin.attach_session_trigger(
    p_table regclass, p_stream text DEFAULT 'events')
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    EXECUTE format('CREATE OR REPLACE TRIGGER sessions_ins AFTER INSERT ON %s '
                   'REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT '
                   'EXECUTE FUNCTION slidewin.sessions_on_insert(%s)', p_table,
                   CASE WHEN p_stream = 'events' THEN '' ELSE quote_literal(p_stream) END);
END
$$;
