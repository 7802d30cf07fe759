-- slidewin.join_status(name): where a join stands. watermark: W (interval joins, asof joins of a
-- table).
-- complete_up_to: every answer with ts before it is known and will not change -- an inner join's
-- W; a left join's W - after, a right join's W - before, a full join's the lesser (an outer row is
-- written once final); a rows or asof join's: the right stream's watermark, less the join's
-- grace, or the left stream's watermark if that is earlier (an answer for a left record before
-- it can no longer change, and no left record before it can still arrive); an asof join of a
-- table's: its W (slidewin.join_watermark: the left stream's watermark - grace; a version of
-- the table arriving behind it is late, so an answer before it cannot change).
-- late_left / late_right: records late for the join (no result, counted). pairs / left_only /
-- right_only: results written.
CREATE OR REPLACE FUNCTION slidewin.join_status(p_name text)
RETURNS TABLE (name text, kind text, join_type text, watermark timestamptz,
               complete_up_to timestamptz, late_left bigint, late_right bigint, pairs bigint,
               left_only bigint, right_only bigint, left_newest timestamptz,
               right_newest timestamptz)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_j  slidewin.joins := slidewin.join_get(p_name);
    v_ln timestamptz;
    v_rn timestamptz;
    v_rw timestamptz;
    v_lw timestamptz;
BEGIN
    SELECT s.newest_ts, s.watermark INTO v_ln, v_lw
      FROM slidewin.stream_state s WHERE s.stream = v_j.left_stream;
    SELECT s.newest_ts, s.watermark INTO v_rn, v_rw
      FROM slidewin.stream_state s WHERE s.stream = v_j.right_stream;
    RETURN QUERY SELECT v_j.name, v_j.kind, v_j.join_type, v_j.watermark,
        CASE WHEN v_j.right_table THEN v_j.watermark
             WHEN v_j.kind <> 'interval'
             THEN least(coalesce(v_rw, v_rn), v_rn - v_j.grace, coalesce(v_lw, v_ln))
             WHEN v_j.join_type = 'inner' THEN v_j.watermark
             WHEN v_j.join_type = 'left' THEN v_j.watermark - v_j.after
             WHEN v_j.join_type = 'right' THEN v_j.watermark - v_j.before
             ELSE v_j.watermark - greatest(v_j.before, v_j.after) END,
        v_j.late_left, v_j.late_right, v_j.pairs, v_j.left_only, v_j.right_only, v_ln, v_rn;
END
$$;
