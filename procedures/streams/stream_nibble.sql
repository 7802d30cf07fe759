-- slidewin.stream_nibble(stream, now, chunk): retention for a declared stream with a history --
-- delete at most `chunk` of its oldest rows older than now - history (the time index's order),
-- and remember the newest time deleted (windows starting at or before it
-- are partial). Returns the rows deleted; call again while it returns more than 0. Each call's
-- cost is bounded by the chunk, whatever the table holds. A stream with no history, and so every
-- table (slidewin.streams.is_table), is never nibbled.
-- A stream an interval join reads keeps, besides, every record its join's watermark W has not
-- passed (slidewin.join_keep_from: left side time >= W - after, right side time >= W - before, a
-- self-join's both): a later record may still
-- pair with it, or its outer row is not final yet. W follows stream time, and stream time can
-- trail the wall clock by the ingest's lag and more: without this, an unmatched record could be
-- deleted before its outer row is written.
CREATE OR REPLACE FUNCTION slidewin.stream_nibble(
    p_stream text, p_now timestamptz, p_chunk integer DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_s     slidewin.streams := slidewin.stream_get(p_stream);
    v_total bigint := 0;
    v_newest timestamptz;
    v_cut    timestamptz;
BEGIN
    IF p_now IS NULL OR p_chunk IS NULL OR p_chunk < 1 THEN
        RAISE EXCEPTION 'now and a chunk of 1 or more are required (got %, %)', p_now, p_chunk
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_s.history IS NULL OR v_s.is_table THEN  -- kept forever; a table: every version
        RETURN 0;
    END IF;
    v_cut := least(p_now - v_s.history, slidewin.join_keep_from(v_s.name));
    -- the newest time this call deletes, recorded first: the registry row is the one lock a
    -- batch of the stream holds from its start (FOR SHARE), so the nibble waits for a running
    -- batch before it locks any rollup row the batch may want, never the other way round
    EXECUTE format('SELECT max(t) FROM (SELECT %1$I AS t FROM slidewin_streams.%2$I '
                   'WHERE %1$I < $1 ORDER BY %1$I LIMIT $2) AS oldest',
                   v_s.time_column, v_s.name)
    INTO v_newest USING v_cut, p_chunk;
    IF v_newest IS NULL THEN
        RETURN 0;
    END IF;
    UPDATE slidewin.streams SET retired_through = greatest(retired_through, v_newest)
     WHERE name = v_s.name;
    -- through the parent table, so that its statement triggers keep the rollups exact; the
    -- oldest rows come from the primary key (time first) of each partition, merged: bounded by
    -- the chunk. A joined stream refuses deletes by hand (slidewin.joins_refuse_change): this
    -- one deletes only what W has passed, and says so for its own statement
    PERFORM set_config('slidewin.retention_stream', v_s.name, true);
    EXECUTE format(
        'WITH gone AS (DELETE FROM slidewin_streams.%1$I t USING (SELECT %2$I AS k, %3$I AS ts '
        'FROM slidewin_streams.%1$I WHERE %3$I < $1 ORDER BY %3$I LIMIT $2) d '
        'WHERE t.%2$I = d.k AND t.%3$I = d.ts RETURNING t.%3$I) SELECT count(*) FROM gone',
        v_s.name, v_s.key_column, v_s.time_column)
    INTO v_total USING v_cut, p_chunk;
    PERFORM set_config('slidewin.retention_stream', '', true);
    PERFORM slidewin.counter_add('retention_deleted', jsonb_build_object('stream', v_s.name),
                                 v_total);
    RETURN v_total;
END
$$;
