-- slidewin.stream_time_prefix(name, alias): what a statement reading a time range of a stream
-- puts before its time condition so that the range is read through the stream's time index --
-- '' for a declared stream (its primary key starts with the time), and for the built-in events,
-- whose primary key is (part, ts, uuid), `<alias>.part = ANY (<every partition>) AND `: without
-- it PostgreSQL reads every partition whole, a cost that follows the table, not the range.
CREATE OR REPLACE FUNCTION slidewin.stream_time_prefix(p_name text, p_alias text)
RETURNS text
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_s slidewin.streams := slidewin.stream_row(p_name);
BEGIN
    RETURN CASE WHEN v_s.builtin
                THEN format('%I.part = ANY (ARRAY(SELECT slidewin.partition_keys())) AND ',
                            p_alias)
                ELSE '' END;
END
$$;
