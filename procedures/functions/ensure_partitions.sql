-- slidewin.ensure_partitions(p_count): make slidewin.events have partitions 0 .. p_count-1.
--
-- Contract: idempotent; only adds (fewer than exist is refused, rows would lose their home);
-- each new partition gets the rollup triggers (so statements naming a partition directly keep
-- rollups exact too) and autovacuum settings that keep up with nibble deletes.
-- Returns the partition count now in force.
-- Note: keys hash modulo the count, so after adding partitions new events of an old key may land
-- in a different partition than its older events.
CREATE OR REPLACE FUNCTION slidewin.ensure_partitions(p_count integer)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    v_have integer;
    v_name text;
BEGIN
    IF p_count IS NULL OR p_count < 1 OR p_count > 1024 THEN
        RAISE EXCEPTION 'p_count must be from 1 to 1024 partitions, got %', coalesce(p_count::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM 1 FROM slidewin.config FOR UPDATE;  -- serialise concurrent callers
    SELECT count(*) INTO v_have FROM pg_inherits WHERE inhparent = 'slidewin.events'::regclass;
    IF p_count < v_have THEN
        RAISE EXCEPTION 'p_count % is fewer than the % partitions that exist; partitions can only be added',
            p_count, v_have
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR i IN 0 .. p_count - 1 LOOP
        v_name := format('events_p%s', lpad(i::text, 3, '0'));
        CONTINUE WHEN to_regclass(format('slidewin.%I', v_name)) IS NOT NULL;
        EXECUTE format(
            'CREATE TABLE slidewin.%I PARTITION OF slidewin.events FOR VALUES IN (%s) WITH ('
            'autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000, '
            'autovacuum_vacuum_cost_delay = 0, autovacuum_vacuum_insert_scale_factor = 0, '
            'autovacuum_vacuum_insert_threshold = 100000, autovacuum_analyze_scale_factor = 0.05)',
            v_name, i);
        PERFORM slidewin.attach_rollup_triggers(format('slidewin.%I', v_name)::regclass);
    END LOOP;
    UPDATE slidewin.config SET partitions = p_count;
    RETURN p_count;
END
$$;
