-- slidewin.join_define(name, left, right, left_on, right_on, kind, join_type, before, after,
-- grace, idle, n_rows, select_left, select_right, now, within): define a join of two streams and
-- create what it needs, in one transaction. Returns the join's row.
--
-- kind 'interval' (maintained): l.left_on = r.right_on AND r.time BETWEEN l.time - before AND
-- l.time + after, both ends inclusive; join_type inner, left, right or full. Creates its results
-- slidewin_joins.<name> and late records slidewin_joins."<name>#late" and the streams'
-- joins_on_insert trigger, then pairs the rows both streams hold already (a one-time cost that
-- grows with them, like CREATE INDEX) and emits the outer rows already final. An asof join gets an
-- (on, time) index on the right stream (its lookup per left record).
-- kind 'rows': the n_rows newest right records at or before each left record's time, matched on
-- the on-columns (Samza's OVER (ROWS n PRECEDING)); kind 'asof': the right stream's newest record
-- for the key at or before the left record's time, and no older than its time - within (NULL:
-- any age; within is an asof join's alone). Both read the streams when asked (inner or left).
-- An asof join of a table (slidewin.streams.is_table) on the right keeps a watermark W and
-- records the right versions late for it (slidewin.joins): it gets
-- slidewin_joins."<name>#late" and the right stream's join triggers, and W is moved at once.
-- Refused, naming the parameter, the value and the fix (Kafka KIP-633's checks): before, after or
-- grace below 0, or any of them or idle over 100 years (slidewin.check_duration); a stream whose
-- history is shorter than before + after + grace; an unknown stream; on-columns of different
-- types; an unknown column. Either side may be the built-in events, and both sides one stream: a
-- self-join pairs each record with every record of the stream the predicate admits, itself
-- included (its own time is always in its window): the plain SQL join of the table with itself,
-- as slidewin.join_exact computes it.
-- select_left / select_right: the columns kept (NULL: all); each side's time and key are always
-- kept, as the result's identity. now: the clock W is first moved by (created_at records it; a
-- stream with no data holds W back however long ago that was: slidewin.join_watermark).
-- the signature before within: dropped, so that a call is never ambiguous between the two
DROP FUNCTION IF EXISTS slidewin.join_define(text, text, text, text, text, text, text, interval,
                                             interval, interval, interval, integer, text[],
                                             text[], timestamptz);
CREATE OR REPLACE FUNCTION slidewin.join_define(
    p_name text, p_left text, p_right text, p_left_on text, p_right_on text DEFAULT NULL,
    p_kind text DEFAULT 'interval', p_join_type text DEFAULT 'inner',
    p_before interval DEFAULT interval '0', p_after interval DEFAULT interval '0',
    p_grace interval DEFAULT interval '0', p_idle interval DEFAULT interval '1 minute',
    p_n_rows integer DEFAULT NULL, p_select_left text[] DEFAULT NULL,
    p_select_right text[] DEFAULT NULL, p_now timestamptz DEFAULT now(),
    p_within interval DEFAULT NULL)
RETURNS slidewin.joins
LANGUAGE plpgsql
AS $$
DECLARE
    v_l    slidewin.streams;
    v_r    slidewin.streams;
    v_lt   text;
    v_rt   text;
    v_need interval;
    v_sl   text[];
    v_sr   text[];
    v_c    text;
    v_row  slidewin.joins;
BEGIN
    PERFORM slidewin.check_stream_name('join', p_name);
    IF EXISTS (SELECT 1 FROM slidewin.joins WHERE name = p_name) THEN
        RAISE EXCEPTION 'join % exists already', p_name
            USING ERRCODE = 'duplicate_object',
                  HINT = 'pick another name, or drop it first (slidewin joins drop NAME --yes)';
    END IF;
    IF p_kind IS NULL OR p_kind NOT IN ('interval', 'rows', 'asof') THEN
        RAISE EXCEPTION 'kind % is not a join kind', coalesce(quote_literal(p_kind), 'NULL')
            USING ERRCODE = 'invalid_parameter_value', HINT = 'use interval, rows or asof';
    END IF;
    IF p_join_type IS NULL OR p_join_type NOT IN ('inner', 'left', 'right', 'full') THEN
        RAISE EXCEPTION 'type % is not a join type', coalesce(quote_literal(p_join_type), 'NULL')
            USING ERRCODE = 'invalid_parameter_value', HINT = 'use inner, left, right or full';
    END IF;
    IF p_kind <> 'interval' AND p_join_type NOT IN ('inner', 'left') THEN
        RAISE EXCEPTION '% join is inner or left, not %',
                        CASE p_kind WHEN 'asof' THEN 'an asof' ELSE 'a rows' END, p_join_type
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'every left record is answered; use --type inner or --type left';
    END IF;
    FOR v_c, v_need IN VALUES ('before', p_before), ('after', p_after), ('grace', p_grace) LOOP
        IF v_need IS NULL OR v_need < interval '0' THEN
            RAISE EXCEPTION '% must be 0 or more, got %', v_c, coalesce(v_need::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = format('give --%s a duration such as 0s, 10s or 2m', v_c);
        END IF;
        -- at most 100 years: every time the join computes (ts +/- before, after, grace) stays
        -- a timestamp, so no insert into either stream can fail on it
        PERFORM slidewin.check_duration(v_c, v_need);
    END LOOP;
    -- within: the age an asof join's version may have (0 .. 100 years; NULL: any)
    IF p_within IS NOT NULL AND p_kind <> 'asof' THEN
        RAISE EXCEPTION 'within % bounds an asof join''s versions, not % join''s',
                        slidewin.duration_text(p_within),
                        CASE p_kind WHEN 'rows' THEN 'a rows' ELSE 'an interval' END
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = CASE p_kind WHEN 'rows' THEN 'leave out --within, or use --as-of'
                         ELSE 'give an interval join before and after' END;
    END IF;
    IF p_within < interval '0' THEN
        RAISE EXCEPTION 'within must be 0 or more, got %', slidewin.duration_text(p_within)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'give --within a duration such as 0s, 10m or 1h';
    END IF;
    PERFORM slidewin.check_duration('within', p_within);
    IF p_idle IS NOT NULL AND p_idle <= interval '0' THEN
        RAISE EXCEPTION 'idle must be more than 0, got %', p_idle
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'give --idle a duration such as 1m, or never';
    END IF;
    PERFORM slidewin.check_duration('idle', p_idle, false);
    IF p_kind = 'rows' AND (p_n_rows IS NULL OR p_n_rows NOT BETWEEN 1 AND 100000) THEN
        RAISE EXCEPTION 'rows must be 1 to 100000, got %', coalesce(p_n_rows::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value', HINT = 'give --rows a count such as 3';
    END IF;
    IF p_kind = 'interval' AND p_n_rows IS NOT NULL THEN
        RAISE EXCEPTION 'rows % is for a rows join, not an interval join', p_n_rows
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'leave out --rows, or leave out --within/--before/--after';
    END IF;
    -- any stream, the built-in events too, and one stream on both sides (a self-join), locked
    -- until the commit (slidewin.join_lock_streams)
    v_l := slidewin.stream_row(p_left);
    v_r := slidewin.stream_row(p_right);
    PERFORM slidewin.join_lock_streams(p_left, p_right);
    p_right_on := coalesce(p_right_on, p_left_on);
    v_lt := slidewin.join_column_type(v_l, p_left_on, 'on');
    v_rt := slidewin.join_column_type(v_r, p_right_on, 'on');
    IF v_lt <> v_rt AND NOT (v_lt IN ('bigint', 'integer') AND v_rt IN ('bigint', 'integer')) THEN
        RAISE EXCEPTION 'on: %.% is % but %.% is %', p_left, p_left_on, v_lt, p_right,
                        p_right_on, v_rt
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'join columns of one type (declare them alike, or pick other columns)';
    END IF;
    -- KIP-633: each side keeps its records long enough for every pair to meet
    v_need := CASE WHEN p_kind = 'interval' THEN p_before + p_after + p_grace ELSE p_grace END;
    FOR v_c IN VALUES (p_left), (p_right) LOOP
        IF (SELECT history FROM slidewin.streams WHERE name = v_c) < v_need THEN
            RAISE EXCEPTION 'stream % keeps % of history, less than before + after + grace = %',
                            v_c, slidewin.duration_text(
                                (SELECT history FROM slidewin.streams WHERE name = v_c)),
                            slidewin.duration_text(v_need)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = format('raise its history (slidewin streams alter %s --history %s) '
                                    'or shorten the join', v_c, slidewin.duration_text(v_need));
        END IF;
    END LOOP;
    -- the kept columns: time and key first (the identity), then the on-column, then the rest
    v_sl := ARRAY[v_l.time_column, v_l.key_column, p_left_on];
    v_sr := ARRAY[v_r.time_column, v_r.key_column, p_right_on];
    FOREACH v_c IN ARRAY coalesce(p_select_left,
            ARRAY(SELECT c->>'name' FROM jsonb_array_elements(v_l.columns) c)) LOOP
        PERFORM slidewin.join_column_type(v_l, v_c, 'select');
        v_sl := v_sl || v_c;
    END LOOP;
    FOREACH v_c IN ARRAY coalesce(p_select_right,
            ARRAY(SELECT c->>'name' FROM jsonb_array_elements(v_r.columns) c)) LOOP
        PERFORM slidewin.join_column_type(v_r, v_c, 'select');
        v_sr := v_sr || v_c;
    END LOOP;
    v_sl := ARRAY(SELECT c FROM unnest(v_sl) WITH ORDINALITY AS u(c, i) GROUP BY c ORDER BY min(i));
    v_sr := ARRAY(SELECT c FROM unnest(v_sr) WITH ORDINALITY AS u(c, i) GROUP BY c ORDER BY min(i));
    IF v_l.keep_extra THEN
        v_sl := v_sl || 'attrs'::text;
    END IF;
    IF v_r.keep_extra THEN
        v_sr := v_sr || 'attrs'::text;
    END IF;
    INSERT INTO slidewin.joins (name, kind, join_type, left_stream, right_stream, left_on,
                                right_on, before, after, grace, idle, n_rows, select_left,
                                select_right, created_at, within, right_table)
    VALUES (p_name, p_kind, p_join_type, p_left, p_right, p_left_on, p_right_on,
            CASE WHEN p_kind = 'interval' THEN p_before ELSE interval '0' END,
            CASE WHEN p_kind = 'interval' THEN p_after ELSE interval '0' END,
            p_grace, p_idle, p_n_rows, v_sl, v_sr, coalesce(p_now, now()), p_within,
            p_kind = 'asof' AND v_r.is_table);
    IF p_kind = 'asof' THEN
        PERFORM slidewin.join_index(p_right, p_right_on);
    END IF;
    IF p_kind = 'interval' OR (p_kind = 'asof' AND v_r.is_table) THEN
        PERFORM slidewin.join_tables(p_name);
    END IF;
    PERFORM slidewin.join_sql(p_name);
    IF p_kind = 'interval' THEN
        PERFORM slidewin.join_triggers(p_left);
        PERFORM slidewin.join_triggers(p_right);
        PERFORM slidewin.join_backfill(p_name, p_now);
    ELSIF p_kind = 'asof' AND v_r.is_table THEN
        -- the versions stored already are the table as the join starts: none is late
        PERFORM slidewin.join_triggers(p_right);
        PERFORM slidewin.join_advance(p_name, p_now);
    END IF;
    SELECT * INTO v_row FROM slidewin.joins WHERE name = p_name;
    PERFORM slidewin.regrant_roles();  -- the new tables get each role set's grants
    RETURN v_row;
END
$$;
