-- slidewin.join_triggers(stream): give a stream the joins_on_insert trigger (pairs new records)
-- and the joins_refuse_change trigger (refuses a DELETE, UPDATE or TRUNCATE by hand, not
-- retention's) while an interval join reads it, or an asof join reads it as its table
-- (right_table: its late versions, slidewin.joins_on_insert), and take them away when none does
-- (a stream nobody joins pays nothing). Each is checked on its own: a store made before the second
-- existed
-- gets it from slidewin db init (join_triggers_all.sql). Statement triggers fire only for the
-- table a statement names, so the stream's table and each of its partitions carry them: the
-- built-in events is written partition by partition (the ingest's binary COPY) and nibbled so too
-- (slidewin.nibble); none is joined twice, since a statement names one table.
CREATE OR REPLACE FUNCTION slidewin.join_triggers(p_stream text)
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    v_parent regclass := slidewin.stream_table(p_stream)::regclass;
    v_table  regclass;
    v_need   boolean := EXISTS (SELECT 1 FROM slidewin.joins
                                  WHERE (kind = 'interval' AND p_stream IN (left_stream,
                                                                           right_stream))
                                     OR (right_table AND right_stream = p_stream));
BEGIN
    FOR v_table IN SELECT v_parent
                   UNION ALL
                   SELECT i.inhrelid::regclass FROM pg_inherits i WHERE i.inhparent = v_parent
    LOOP
        PERFORM slidewin.join_trigger(v_table, p_stream, 'joins_on_insert', v_need,
                                      'AFTER INSERT', 'REFERENCING NEW TABLE AS new_rows ');
        PERFORM slidewin.join_trigger(v_table, p_stream, 'joins_refuse_change', v_need,
                                      'BEFORE DELETE OR UPDATE OR TRUNCATE', '');
    END LOOP;
    RETURN v_need;
END
$$;
