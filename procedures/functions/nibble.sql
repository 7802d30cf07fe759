-- slidewin.nibble(p_part, p_cutoff, p_target_rows, p_chunk): the one bounded delete under every
-- retention procedure. Returns the number of rows it deleted.
--
-- Contract (promise 4):
--   * deletes from partition p_part the oldest rows, in (ts, uuid) order -- a total order, since
--     (part, ts, uuid) is the primary key -- that are older than p_cutoff (when given) or beyond
--     the newest p_target_rows (when given);
--   * deletes at most p_chunk rows: the chunk is a cap, not a target (VoltDB's overshoots on
--     timestamp ties; the uuid tie-break removes the tie);
--   * always makes progress when there is work: the oldest row qualifies whenever any row does;
--   * deterministic: the same state and arguments delete the same rows;
--   * while an interval join reads events, never a row at or after slidewin.join_keep_from: a
--     row its W has not passed stays, whatever the cutoff or the row target (then the oldest
--     row may be kept, and a call deletes nothing until W moves).
-- Cost: reads at most p_chunk live index entries and the partition's rollup rows, never the
-- table. The row count comes from slidewin.rollups, which are exact (promise 1); so does the
-- oldest second still holding rows, where the index scan starts: the dead entries of earlier
-- nibbles (kept until VACUUM, and not even skippable while an open snapshot holds back the xmin
-- horizon) are never walked again, so the cost does not grow with what was deleted before.
CREATE OR REPLACE FUNCTION slidewin.nibble(
    p_part integer, p_cutoff timestamptz, p_target_rows bigint, p_chunk integer)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_excess  bigint := 0;
    v_ctids   tid[];
    v_deleted bigint;
    v_from    timestamptz;
    v_retired timestamptz;
    v_keep    timestamptz;  -- what the joins reading events still need (NULL: none reads it)
    v_seqscan text := current_setting('enable_seqscan');
BEGIN
    PERFORM slidewin.check_partition(p_part);
    PERFORM slidewin.check_chunk(p_chunk);
    IF p_cutoff IS NULL AND p_target_rows IS NULL THEN
        RAISE EXCEPTION 'p_cutoff and p_target_rows are both NULL; give at least one limit'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_target_rows IS NOT NULL THEN
        IF p_target_rows < 0 THEN
            RAISE EXCEPTION 'p_target_rows must be >= 0, got %', p_target_rows
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT greatest(coalesce(sum(n), 0) - p_target_rows, 0) INTO v_excess
          FROM slidewin.rollups WHERE part = p_part;
    END IF;
    SELECT min(sec) INTO v_from FROM slidewin.rollups WHERE part = p_part;
    v_keep := slidewin.join_keep_from('events');
    IF v_from IS NULL THEN
        RETURN 0;  -- the partition holds no rows
    END IF;

    -- Oldest p_chunk rows; a row goes if it is within the excess or older than the cutoff. Both
    -- conditions select a prefix of the (ts, uuid) order, so the victims are a prefix too.
    -- EXECUTE plans with the actual partition, so the scan is pruned to that one partition.
    EXECUTE
        'SELECT array_agg(ctid) FROM ('
        '  SELECT ctid, ts, row_number() OVER (ORDER BY ts, uuid) AS rn'
        '    FROM (SELECT ctid, ts, uuid FROM slidewin.events WHERE part = $1 AND ts >= $5'
        '          ORDER BY ts, uuid LIMIT $2) AS oldest'
        ') AS o WHERE (o.rn <= $3 OR o.ts < $4) AND ($6::timestamptz IS NULL OR o.ts < $6)'
        INTO v_ctids USING p_part::smallint, p_chunk, v_excess, p_cutoff, v_from, v_keep;
    IF v_ctids IS NULL THEN
        RETURN 0;
    END IF;
    -- Delete by TID whatever the costs say. The DELETE names the partition and has no other
    -- condition, so no index path exists; with sequential scans disabled for this one statement
    -- the TID scan is the only plan left. (On paper a sequential scan -- hashed ANY over a large
    -- chunk -- or, through the parent, a scan of the whole primary key often looks cheaper; both
    -- grow with the partition, not the chunk: promise 5.) The partition's own rollup triggers
    -- keep the rollups exact, as for any statement naming a partition.
    -- A joined events refuses deletes by hand (slidewin.joins_refuse_change); this one deletes
    -- only what the joins' W has passed, and says so for its own statement.
    PERFORM set_config('enable_seqscan', 'off', true);
    PERFORM set_config('slidewin.retention_stream', 'events', true);
    EXECUTE format('WITH d AS (DELETE FROM slidewin.%I WHERE ctid = ANY ($1) RETURNING ts) '
                   'SELECT count(*), max(ts) FROM d', slidewin.partition_name(p_part))
        INTO v_deleted, v_retired USING v_ctids;
    PERFORM set_config('slidewin.retention_stream', '', true);
    PERFORM set_config('enable_seqscan', v_seqscan, true);
    IF v_deleted > 0 THEN  -- what windows call `partial` (see slidewin.retention_state)
        INSERT INTO slidewin.retention_state AS s (part, retired_through)
        VALUES (p_part, v_retired)
        ON CONFLICT (part) DO UPDATE
           SET retired_through = greatest(s.retired_through, excluded.retired_through);
        -- what /metrics reports as deleted by retention (a row per partition: see
        -- slidewin.counters)
        PERFORM slidewin.counter_add('retention_deleted',
                               jsonb_build_object('stream', 'events', 'part', p_part), v_deleted);
    END IF;
    RETURN v_deleted;
END
$$;
