-- slidewin.join_triggers(stream): give a stream the joins_on_insert trigger while an interval
-- join reads it, and take it away when none does (a stream nobody joins pays nothing).
CREATE OR REPLACE FUNCTION slidewin.join_triggers(p_stream text)
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    v_has  boolean := EXISTS (SELECT 1 FROM pg_trigger
                               WHERE tgrelid = format('slidewin_streams.%I', p_stream)::regclass
                                 AND tgname = 'joins_on_insert');
    v_need boolean := EXISTS (SELECT 1 FROM slidewin.joins WHERE kind = 'interval'
                                 AND p_stream IN (left_stream, right_stream));
BEGIN
    IF v_need AND NOT v_has THEN
        EXECUTE format('CREATE TRIGGER joins_on_insert AFTER INSERT ON slidewin_streams.%I '
                       'REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT '
                       'EXECUTE FUNCTION slidewin.joins_on_insert(%L)', p_stream, p_stream);
    ELSIF v_has AND NOT v_need THEN
        EXECUTE format('DROP TRIGGER joins_on_insert ON slidewin_streams.%I', p_stream);
    END IF;
    RETURN v_need;
END
$$;
