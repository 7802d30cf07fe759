-- slidewin.stream_nibble(stream, now, chunk): retention for a declared stream with a history, a
-- row limit (max_rows) or both -- delete at most `chunk` of its oldest rows, in (time, key)
-- order, that are older than now - history or beyond its newest max_rows rows (as
-- slidewin.nibble for the built-in stream: both limits hold when both are set), and remember the
-- newest time deleted (windows starting at or before it are partial). Returns the rows deleted;
-- call again while it returns `chunk`. Each call's cost is bounded by the chunk, whatever the
-- table holds: the oldest `chunk` rows come from the primary key (time, key) of each partition,
-- merged; the row count comes from the stream's exact rollups (slidewin_rollups.<name>, one row
-- per second), never the table. (time, key) is the stream's identity, so the order is total and
-- the row limit exact: the newest max_rows rows of the whole stream stay, whatever the key skew.
-- A stream with neither limit, and so every table (slidewin.streams.is_table), is never
-- nibbled.
-- A stream an interval join reads keeps, besides, every record its join's watermark W has not
-- passed (slidewin.join_keep_from: left side time >= W - after, right side time >= W - before, a
-- self-join's both), whatever the history or the row limit: a later record may still
-- pair with it, or its outer row is not final yet. W follows stream time, and stream time can
-- trail the wall clock by the ingest's lag and more: without this, an unmatched record could be
-- deleted before its outer row is written.
CREATE OR REPLACE FUNCTION slidewin.stream_nibble(
    p_stream text, p_now timestamptz, p_chunk integer DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_s      slidewin.streams := slidewin.stream_get(p_stream);
    v_total  bigint := 0;
    v_excess bigint := 0;
    v_newest timestamptz;
    v_cut    timestamptz;
    v_keep   timestamptz;
    v_oldest text;
    v_plan   text[] := ARRAY[current_setting('enable_seqscan'), current_setting('enable_hashjoin'),
                             current_setting('enable_mergejoin')];
BEGIN
    IF p_now IS NULL OR p_chunk IS NULL OR p_chunk < 1 THEN
        RAISE EXCEPTION 'now and a chunk of 1 or more are required (got %, %)', p_now, p_chunk
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (v_s.history IS NULL AND v_s.max_rows IS NULL) OR v_s.is_table THEN
        RETURN 0;  -- kept forever; a table: every version
    END IF;
    v_cut := p_now - v_s.history;  -- NULL: no history, the row limit alone
    v_keep := coalesce(slidewin.join_keep_from(v_s.name), 'infinity');
    IF v_s.max_rows IS NOT NULL THEN
        EXECUTE format('SELECT greatest(coalesce(sum(n), 0) - $1, 0) FROM slidewin_rollups.%I',
                       v_s.name)
        INTO v_excess USING v_s.max_rows;
    END IF;
    -- the victims: of the oldest `chunk` rows (that W has passed), those within the excess or
    -- older than the cut -- both a prefix of the (time, key) order, so the victims are one too
    v_oldest := format(
        'SELECT k, ts FROM (SELECT k, ts, row_number() OVER (ORDER BY ts, k) AS rn FROM '
        '(SELECT %2$I AS k, %3$I AS ts FROM slidewin_streams.%1$I WHERE %3$I < $1 '
        'ORDER BY %3$I, %2$I LIMIT $2) AS oldest) AS o WHERE o.rn <= $3 OR o.ts < $4',
        v_s.name, v_s.key_column, v_s.time_column);
    -- the newest time this call deletes, recorded first: the registry row is the one lock a
    -- batch of the stream holds from its start (FOR SHARE), so the nibble waits for a running
    -- batch before it locks any rollup row the batch may want, never the other way round
    EXECUTE format('SELECT max(ts) FROM (%s) AS v', v_oldest)
    INTO v_newest USING v_keep, p_chunk, v_excess, v_cut;
    IF v_newest IS NULL THEN
        RETURN 0;
    END IF;
    UPDATE slidewin.streams SET retired_through = greatest(retired_through, v_newest)
     WHERE name = v_s.name;
    -- through the parent table, so that its statement triggers keep the rollups exact. A joined
    -- stream refuses deletes by hand (slidewin.joins_refuse_change): this one deletes only what
    -- W has passed, and says so for its own statement
    PERFORM set_config('slidewin.retention_stream', v_s.name, true);
    -- each victim found by its primary key, whatever the costs say: for a large chunk a hash
    -- join over every partition read whole looks cheaper on paper, and grows with the table
    PERFORM set_config('enable_seqscan', 'off', true);
    PERFORM set_config('enable_hashjoin', 'off', true);
    PERFORM set_config('enable_mergejoin', 'off', true);
    EXECUTE format(
        'WITH gone AS (DELETE FROM slidewin_streams.%1$I t USING (%4$s) d '
        'WHERE t.%2$I = d.k AND t.%3$I = d.ts RETURNING t.%3$I) SELECT count(*) FROM gone',
        v_s.name, v_s.key_column, v_s.time_column, v_oldest)
    INTO v_total USING v_keep, p_chunk, v_excess, v_cut;
    PERFORM set_config('enable_seqscan', v_plan[1], true);
    PERFORM set_config('enable_hashjoin', v_plan[2], true);
    PERFORM set_config('enable_mergejoin', v_plan[3], true);
    PERFORM set_config('slidewin.retention_stream', '', true);
    PERFORM slidewin.counter_add('retention_deleted', jsonb_build_object('stream', v_s.name),
                                 v_total);
    RETURN v_total;
END
$$;
