-- slidewin.join_backfill(name, now): pair the records both streams of a new interval join hold
-- already (one hash join of the two tables), then move W
-- and write the outer rows already final. Run once by slidewin.join_define; its cost grows with
-- the streams, like building an index.
CREATE OR REPLACE FUNCTION slidewin.join_backfill(p_name text, p_now timestamptz)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_j     slidewin.joins := slidewin.join_get(p_name);
    v_pairs bigint;
BEGIN
    EXECUTE replace(v_j.pair_left_sql, 'FROM new_rows n ',
                    format('FROM %s n ', slidewin.stream_table(v_j.left_stream)))
      USING NULL::timestamptz, '-infinity'::timestamptz, 'infinity'::timestamptz;
    GET DIAGNOSTICS v_pairs = ROW_COUNT;
    UPDATE slidewin.joins SET pairs = pairs + v_pairs WHERE name = v_j.name;
    PERFORM slidewin.join_advance(p_name, p_now);
    RETURN v_pairs;
END
$$;
