-- slidewin.joins_refuse_change(): BEFORE DELETE, UPDATE and TRUNCATE statement trigger of a
-- stream an interval join reads (TG_ARGV[0]: the stream). A join's results are written once, as
-- its records arrive, and never taken back: a record deleted or changed by hand after it was
-- paired (or after its outer row was written) would leave results that slidewin.join_exact no
-- longer gives. So such a change is refused, naming the joins and the fix. Retention is not
-- refused: slidewin.stream_nibble (slidewin.nibble for events) deletes only records the joins'
-- W has passed, and says so by setting slidewin.retention_stream to the stream for its own
-- statement (a result stays until
-- both its records may be gone: slidewin.join_nibble). It sits on the stream's table and on
-- each of its partitions (slidewin.join_triggers): a statement naming a partition is seen too.
-- A table an asof join reads (right_table) is guarded alike: a version changed or deleted by
-- hand would change answers already final (a table has no retention to let through).
CREATE OR REPLACE FUNCTION slidewin.joins_refuse_change()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_joins text;
BEGIN
    IF TG_OP = 'DELETE'
       AND current_setting('slidewin.retention_stream', true) IS NOT DISTINCT FROM TG_ARGV[0] THEN
        RETURN NULL;
    END IF;
    SELECT string_agg(name, ', ' ORDER BY name) INTO v_joins FROM slidewin.joins
     WHERE (kind = 'interval' AND TG_ARGV[0] IN (left_stream, right_stream))
        OR (right_table AND right_stream = TG_ARGV[0]);
    IF v_joins IS NULL THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'stream % is joined by %: % of its records by hand would leave the join''s '
                    'results wrong; drop the join first (slidewin joins drop % --yes), change the '
                    'records, then add it again', TG_ARGV[0], v_joins,
                    CASE TG_OP WHEN 'UPDATE' THEN 'an UPDATE' ELSE 'a ' || TG_OP END,
                    replace(v_joins, ', ', ' --yes; slidewin joins drop ')
        USING ERRCODE = 'object_in_use';
END
$$;
