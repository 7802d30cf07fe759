-- slidewin.ensure_partitions(p_count): make slidewin.events have partitions 0 .. p_count-1.
--
-- Contract: at most 1000 partitions, named by slidewin.partition_name (events_p000 ..
-- events_p999: three digits);
-- idempotent; only adds (fewer than exist is refused, rows would lose their home);
-- each new partition gets the rollup triggers (so statements naming a partition directly keep
-- rollups exact too), and every partition the session trigger. Every partition, new or old,
-- gets the autovacuum settings below, and the join triggers while a join reads events (an
-- ALTER only where they differ, so partitions made before a settings change catch up on the
-- next `slidewin db init`). Returns the partition count now in force.
--
-- Autovacuum settings (nibble deletes leave dead tuples at the ingest rate): vacuum as soon as a
-- partition has 2,000 dead tuples whatever its size (no scale factor), at full speed (no cost
-- delay, the highest cost limit), and after 100,000 inserts (keeps the visibility map current).
-- autovacuum_naptime -- how often autovacuum looks at a database -- is server-wide and can't be
-- set per table; the retention job vacuums due partitions itself between visits (jobs/vacuum.py).
--
-- Note: keys hash modulo the count, so after adding partitions new events of an old key may land
-- in a different partition than its older events.
CREATE OR REPLACE FUNCTION slidewin.ensure_partitions(p_count integer)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    v_have    bigint;
    v_name    text;
    v_options text[] := ARRAY[
        'autovacuum_vacuum_scale_factor=0', 'autovacuum_vacuum_threshold=2000',
        'autovacuum_vacuum_cost_delay=0', 'autovacuum_vacuum_cost_limit=10000',
        'autovacuum_vacuum_insert_scale_factor=0', 'autovacuum_vacuum_insert_threshold=100000',
        'autovacuum_analyze_scale_factor=0.05'];
    v_with    text;
    v_part    regclass;
BEGIN
    IF p_count IS NULL OR p_count < 1 OR p_count > 1000 THEN
        RAISE EXCEPTION 'p_count must be from 1 to 1000 partitions, got %', coalesce(p_count::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_with := array_to_string(v_options, ', ');
    PERFORM 1 FROM slidewin.config FOR UPDATE;  -- serialise concurrent callers
    SELECT count(*) INTO v_have FROM pg_inherits WHERE inhparent = 'slidewin.events'::regclass;
    IF p_count < v_have THEN
        RAISE EXCEPTION 'p_count % is fewer than the % partitions that exist; partitions can only be added',
            p_count, v_have
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR i IN 0 .. p_count - 1 LOOP
        v_name := slidewin.partition_name(i);
        CONTINUE WHEN to_regclass(format('slidewin.%I', v_name)) IS NOT NULL;
        EXECUTE format(
            'CREATE TABLE slidewin.%I PARTITION OF slidewin.events FOR VALUES IN (%s) WITH (%s)',
            v_name, i, v_with);
        PERFORM slidewin.attach_rollup_triggers(format('slidewin.%I', v_name)::regclass);
    END LOOP;
    FOR v_part IN
        SELECT c.oid::regclass FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'slidewin.events'::regclass
           AND NOT coalesce(c.reloptions @> v_options, false)
    LOOP
        EXECUTE format('ALTER TABLE %s SET (%s)', v_part, v_with);
    END LOOP;
    -- the session trigger on every partition lacking it (partitions made before it existed)
    FOR v_part IN
        SELECT c.oid::regclass FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'slidewin.events'::regclass
           AND NOT EXISTS (SELECT 1 FROM pg_trigger t
                            WHERE t.tgrelid = c.oid AND t.tgname = 'sessions_ins')
    LOOP
        PERFORM slidewin.attach_session_trigger(v_part);
    END LOOP;
    -- a joined events: the join triggers on every partition, new ones too (slidewin.join_triggers)
    PERFORM slidewin.join_triggers('events');
    UPDATE slidewin.config SET partitions = p_count;
    RETURN p_count;
END
$$;
