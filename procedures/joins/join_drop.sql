-- slidewin.join_drop(name): remove a join -- its results, late records and registry row -- and,
-- from its streams, the trigger and the (on, time) index no other join uses, in one transaction.
-- The streams and their rows stay. Returns the results it held.
CREATE OR REPLACE FUNCTION slidewin.join_drop(p_name text)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_j    slidewin.joins := slidewin.join_get(p_name);
    v_rows bigint := 0;
BEGIN
    PERFORM slidewin.join_lock_streams(v_j.left_stream, v_j.right_stream);
    IF v_j.kind = 'interval' THEN
        v_rows := v_j.pairs + v_j.left_only + v_j.right_only;
        EXECUTE format('DROP TABLE slidewin_joins.%I, slidewin_joins.%I', v_j.name,
                       v_j.name || '#late');
    ELSIF v_j.right_table THEN
        EXECUTE format('DROP TABLE slidewin_joins.%I', v_j.name || '#late');
    END IF;
    DELETE FROM slidewin.joins WHERE name = v_j.name;
    PERFORM slidewin.join_triggers(v_j.left_stream);
    PERFORM slidewin.join_triggers(v_j.right_stream);
    IF v_j.kind = 'asof' AND NOT EXISTS (SELECT 1 FROM slidewin.joins WHERE kind = 'asof'
                     AND right_stream = v_j.right_stream AND right_on = v_j.right_on) THEN
        EXECUTE format('DROP INDEX IF EXISTS %s.%I',
                       (SELECT c.relnamespace::regnamespace::text FROM pg_class c
                         WHERE c.oid = slidewin.stream_table(v_j.right_stream)::regclass),
                       v_j.right_stream || '#on_' || left(md5(v_j.right_on), 8));
    END IF;
    RETURN v_rows;
END
$$;
