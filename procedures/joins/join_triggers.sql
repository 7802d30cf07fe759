-- slidewin.join_triggers(stream): give a stream the joins_on_insert trigger (pairs new records)
-- and the joins_refuse_change trigger (refuses a DELETE, UPDATE or TRUNCATE by hand, not
-- retention's) while an interval join reads it, and take them away when none does (a stream
-- nobody joins pays nothing). Each is checked on its own: a store made before the second existed
-- gets it from slidewin db init (join_triggers_all.sql).
CREATE OR REPLACE FUNCTION slidewin.join_triggers(p_stream text)
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    v_table regclass := format('slidewin_streams.%I', p_stream)::regclass;
    v_need  boolean := EXISTS (SELECT 1 FROM slidewin.joins WHERE kind = 'interval'
                                  AND p_stream IN (left_stream, right_stream));
    v_has   boolean;
BEGIN
    v_has := EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = v_table
                                                AND tgname = 'joins_on_insert');
    IF v_need AND NOT v_has THEN
        EXECUTE format('CREATE TRIGGER joins_on_insert AFTER INSERT ON slidewin_streams.%I '
                       'REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT '
                       'EXECUTE FUNCTION slidewin.joins_on_insert(%L)', p_stream, p_stream);
    ELSIF v_has AND NOT v_need THEN
        EXECUTE format('DROP TRIGGER joins_on_insert ON slidewin_streams.%I', p_stream);
    END IF;
    v_has := EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = v_table
                                                AND tgname = 'joins_refuse_change');
    IF v_need AND NOT v_has THEN
        EXECUTE format('CREATE TRIGGER joins_refuse_change '
                       'BEFORE DELETE OR UPDATE OR TRUNCATE ON slidewin_streams.%I '
                       'FOR EACH STATEMENT EXECUTE FUNCTION slidewin.joins_refuse_change(%L)',
                       p_stream, p_stream);
    ELSIF v_has AND NOT v_need THEN
        EXECUTE format('DROP TRIGGER joins_refuse_change ON slidewin_streams.%I', p_stream);
    END IF;
    RETURN v_need;
END
$$;
