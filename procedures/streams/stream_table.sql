-- slidewin.stream_table(name): the table holding a stream's records, schema-qualified and quoted
-- for format('%s'): slidewin.events for the built-in stream (LIST-partitioned, written partition
-- by partition), slidewin_streams.<name> for a declared one.
CREATE OR REPLACE FUNCTION slidewin.stream_table(p_name text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_s slidewin.streams := slidewin.stream_row(p_name);
BEGIN
    RETURN CASE WHEN v_s.builtin THEN 'slidewin.events'
                ELSE format('slidewin_streams.%I', v_s.name) END;
END
$$;
