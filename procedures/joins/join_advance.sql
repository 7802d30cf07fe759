-- slidewin.join_advance(name, now): move an interval join's watermark W to where its inputs
-- stand (slidewin.join_watermark; never back) and write the outer rows that became final: a left
-- record with no pair once W > its time + after, a right one once W > its time + before (Kafka
-- KIP-633: never at arrival). Only the records between the old and the new W are read (the
-- streams' time index): the cost follows the records finalized. An asof join of a table
-- (right_table) has W alone to move: its answers are read when asked, final before W. Locks the
-- join's row (the trigger's lock order); returns W (NULL: a join that keeps none).
CREATE OR REPLACE FUNCTION slidewin.join_advance(p_name text, p_now timestamptz DEFAULT now())
RETURNS timestamptz
LANGUAGE plpgsql
SET jit = off  -- compiling a batch's statements costs more than it saves
AS $$
DECLARE
    v_j     slidewin.joins;
    v_w     timestamptz;
    v_old   timestamptz;
    v_left  bigint := 0;
    v_right bigint := 0;
BEGIN
    IF p_now IS NULL THEN
        RAISE EXCEPTION 'now is required' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM slidewin.join_get(p_name);
    SELECT * INTO v_j FROM slidewin.joins WHERE name = p_name FOR UPDATE;
    IF v_j.kind <> 'interval' AND NOT v_j.right_table THEN
        RETURN NULL;
    END IF;
    v_w := slidewin.join_watermark(v_j, p_now);
    IF v_w IS NULL OR v_w <= v_j.watermark THEN
        RETURN v_j.watermark;
    END IF;
    IF v_j.kind = 'asof' THEN
        UPDATE slidewin.joins SET watermark = v_w WHERE name = v_j.name;
        PERFORM pg_notify('slidewin_joins', v_j.name);
        RETURN v_w;
    END IF;
    v_old := coalesce(v_j.watermark, '-infinity');
    IF v_j.join_type IN ('left', 'full') THEN
        EXECUTE v_j.final_left_sql USING v_old - v_j.after, v_w - v_j.after;
        GET DIAGNOSTICS v_left = ROW_COUNT;
    END IF;
    IF v_j.join_type IN ('right', 'full') THEN
        EXECUTE v_j.final_right_sql USING v_old - v_j.before, v_w - v_j.before;
        GET DIAGNOSTICS v_right = ROW_COUNT;
    END IF;
    UPDATE slidewin.joins
       SET watermark = v_w, left_only = left_only + v_left, right_only = right_only + v_right
     WHERE name = v_j.name;
    PERFORM pg_notify('slidewin_joins', v_j.name);
    RETURN v_w;
END
$$;
