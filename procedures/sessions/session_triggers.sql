-- slidewin.session_triggers(p_stream): the session trigger (slidewin.attach_session_trigger) on
-- a stream's table and each of its partitions, so an insert naming either keeps the stream's
-- session windows. Run when a declared stream is defined (slidewin.stream_define) and, for the
-- streams already there, by slidewin db init (streams/stream_session_triggers.sql), on each
-- table lacking it: a table that has it is not locked. Idempotent.
CREATE OR REPLACE FUNCTION slidewin.session_triggers(p_stream text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_parent regclass := slidewin.stream_table(p_stream)::regclass;
    v_table  regclass;
BEGIN
    FOR v_table IN SELECT v_parent
                   UNION ALL
                   SELECT i.inhrelid::regclass FROM pg_inherits i WHERE i.inhparent = v_parent
    LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_trigger t  -- no lock taken where it is there
                               WHERE t.tgrelid = v_table AND t.tgname = 'sessions_ins');
        PERFORM slidewin.attach_session_trigger(v_table, p_stream);
    END LOOP;
END
$$;
