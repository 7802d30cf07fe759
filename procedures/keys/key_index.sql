-- slidewin.key_index(p_on, p_stream): turn a stream's per-key access path on (true) or off
-- (false); returns whether it is on afterwards (NULL: only report). p_stream is the built-in
-- `events` unless named. The path is an index on the stream's table (key, time) INCLUDE (its
-- measures) -- slidewin.events (uuid, ts) INCLUDE (val), named events_key_ts; for a declared
-- stream slidewin_streams."<name>#key" (slidewin.key_index_name) -- on the partitioned parent, so
-- every partition, and every partition added later, has it. With it, a key's windows read only
-- that key's rows in the range (one index range per partition, or the one partition holding a
-- declared stream's key); without it they read every row of the range (of that partition) and
-- keep the key's. Opt-in because every insert then maintains one more index (`slidewin bench
-- sessions` measures the cost). Building it reads the whole table once and blocks writes
-- meanwhile; dropping it is immediate, and dropping the stream drops it with its table. Turning
-- it on when it is on changes nothing -- unless the stream's measures changed since it was built
-- (slidewin.stream_add_measure), when it is built again to include them. Only the owner of the
-- stream's table (the store's owner role, `slidewin db roles`) may turn it on or off.
-- the signature before streams had one: dropped, so that key_index(true) is never ambiguous
DROP FUNCTION IF EXISTS slidewin.key_index(boolean);
CREATE OR REPLACE FUNCTION slidewin.key_index(
    p_on boolean DEFAULT NULL, p_stream text DEFAULT 'events')
RETURNS boolean
LANGUAGE plpgsql
AS $$
DECLARE
    v_s    record;  -- slidewin.streams, made after this area
    v_at   record;
    v_ix   text;
    v_cols text[];
    v_have text[];
    v_incl text;
BEGIN
    SELECT * INTO v_s FROM slidewin.stream_row(p_stream);
    v_cols := ARRAY[v_s.key_column, v_s.time_column] || v_s.measures;
    SELECT * INTO v_at FROM slidewin.key_index_name(v_s.name);
    v_ix := format('%I.%I', v_at.schema_name, v_at.index_name);
    IF p_on THEN
        -- two enables at once: the second waits, then finds the index built
        PERFORM pg_advisory_xact_lock(hashtext('slidewin.key_index ' || v_s.name));
        SELECT array_agg(a.attname::text ORDER BY k.n) INTO v_have
          FROM pg_index i
         CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
         WHERE i.indexrelid = to_regclass(v_ix);
        IF v_have IS DISTINCT FROM v_cols THEN
            IF v_have IS NOT NULL THEN  -- built before the stream's measures changed
                EXECUTE format('DROP INDEX %I.%I', v_at.schema_name, v_at.index_name);
            END IF;
            SELECT coalesce(' INCLUDE (' || string_agg(format('%I', u.m), ', ' ORDER BY u.o)
                            || ')', '')
              INTO v_incl FROM unnest(v_s.measures) WITH ORDINALITY AS u(m, o);
            EXECUTE format('CREATE INDEX %I ON %s (%I, %I)%s', v_at.index_name,
                           slidewin.stream_table(v_s.name), v_s.key_column, v_s.time_column,
                           v_incl);
        END IF;
    ELSIF NOT p_on THEN
        EXECUTE format('DROP INDEX IF EXISTS %I.%I', v_at.schema_name, v_at.index_name);
    END IF;
    RETURN to_regclass(v_ix) IS NOT NULL;
END
$$;
