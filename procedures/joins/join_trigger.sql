-- slidewin.join_trigger(table, stream, trigger, need, event, referencing): create statement
-- trigger `trigger` (running slidewin.<trigger>(stream)) on one table of a stream when it is
-- needed and missing, drop it when it is there and not needed (slidewin.join_triggers).
CREATE OR REPLACE FUNCTION slidewin.join_trigger(p_table regclass, p_stream text, p_trigger text,
                                                 p_need boolean, p_event text,
                                                 p_referencing text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_has boolean := EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = p_table
                                                        AND tgname = p_trigger);
BEGIN
    IF p_need AND NOT v_has THEN
        EXECUTE format('CREATE TRIGGER %I %s ON %s %sFOR EACH STATEMENT '
                       'EXECUTE FUNCTION slidewin.%I(%L)', p_trigger, p_event, p_table,
                       p_referencing, p_trigger, p_stream);
    ELSIF v_has AND NOT p_need THEN
        EXECUTE format('DROP TRIGGER %I ON %s', p_trigger, p_table);
    END IF;
END
$$;
