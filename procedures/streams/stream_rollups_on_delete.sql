-- slidewin.stream_rollups_on_delete(): AFTER DELETE and AFTER UPDATE statement trigger of a declared
-- stream's table (TG_ARGV[0]: its name): the seconds the statement touched are emptied and
-- aggregated again from the raw rows (slidewin.stream_rollup_sql's recompute_sql), so sums, min
-- and max stay exact and nothing is ever subtracted.
CREATE OR REPLACE FUNCTION slidewin.stream_rollups_on_delete()
RETURNS trigger
LANGUAGE plpgsql
SET extra_float_digits = 1  -- as in slidewin.stream_rollups_on_insert
AS $$
DECLARE
    v_s    slidewin.streams;
    v_secs timestamptz[];
    v_mins timestamptz[];
BEGIN
    SELECT * INTO STRICT v_s FROM slidewin.streams WHERE name = TG_ARGV[0];
    IF TG_OP = 'UPDATE' THEN
        EXECUTE format('SELECT array_agg(DISTINCT s) FROM (SELECT slidewin.grain_floor(%1$I, 1) '
                       'FROM old_rows UNION SELECT slidewin.grain_floor(%1$I, 1) FROM new_rows) '
                       'AS u(s)', v_s.time_column) INTO v_secs;
    ELSE
        EXECUTE format('SELECT array_agg(DISTINCT slidewin.grain_floor(%I, 1)) FROM old_rows',
                       v_s.time_column) INTO v_secs;
    END IF;
    IF v_secs IS NULL THEN
        RETURN NULL;
    END IF;
    -- rows of each grain locked in (sec) order, seconds before minutes, as the insert trigger's
    -- upserts take them: a nibble and a batch touching the same minute wait, never deadlock
    EXECUTE format('SELECT 1 FROM slidewin_rollups.%I WHERE sec = ANY($1) ORDER BY sec FOR UPDATE',
                   v_s.name) USING v_secs;
    EXECUTE format('DELETE FROM slidewin_rollups.%I WHERE sec = ANY($1)', v_s.name) USING v_secs;
    EXECUTE v_s.recompute_sql USING v_secs;
    -- then the minutes holding those seconds, from their second rollups
    SELECT array_agg(DISTINCT date_trunc('minute', s, 'UTC')) INTO v_mins FROM unnest(v_secs) s;
    EXECUTE format('SELECT 1 FROM slidewin_rollups.%I WHERE sec = ANY($1) ORDER BY sec FOR UPDATE',
                   v_s.name || '#minute') USING v_mins;
    EXECUTE format('DELETE FROM slidewin_rollups.%I WHERE sec = ANY($1)', v_s.name || '#minute')
        USING v_mins;
    EXECUTE v_s.minute_recompute_sql USING v_mins;
    RETURN NULL;
END
$$;
