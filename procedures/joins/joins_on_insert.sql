-- slidewin.joins_on_insert(): AFTER INSERT statement trigger of a stream an interval join reads
-- (TG_ARGV[0]: the stream). For each such join, in name order (one lock order for every writer):
-- lock its registry row -- batches of the two streams take turns, so of two records written
-- concurrently the later transaction sees the earlier one's commit and pairs them, exactly once --
-- then record the new rows older than W as late, pair the others with the other stream's stored
-- rows in the time range they can match (pair_*_sql: the batch's times widened by before and
-- after), count, and signal channel slidewin_joins with the join's name. Any insert (the
-- ingest's or a psql user's) is joined the same way.
CREATE OR REPLACE FUNCTION slidewin.joins_on_insert()
RETURNS trigger
LANGUAGE plpgsql
SET jit = off  -- compiling a batch's statements costs more than it saves
AS $$
DECLARE
    v_j     slidewin.joins;
    v_left  boolean;
    v_late  bigint;
    v_pairs bigint;
    v_time  text := (SELECT time_column FROM slidewin.streams WHERE name = TG_ARGV[0]);
    v_lo    timestamptz;
    v_hi    timestamptz;
BEGIN
    EXECUTE format('SELECT min(%1$I), max(%1$I) FROM new_rows', v_time) INTO v_lo, v_hi;
    IF v_lo IS NULL THEN
        RETURN NULL;
    END IF;
    FOR v_j IN SELECT * FROM slidewin.joins
                WHERE kind = 'interval' AND TG_ARGV[0] IN (left_stream, right_stream)
                ORDER BY name FOR UPDATE LOOP
        v_left := v_j.left_stream = TG_ARGV[0];
        v_late := 0;
        IF v_j.watermark IS NOT NULL THEN
            EXECUTE CASE WHEN v_left THEN v_j.late_left_sql ELSE v_j.late_right_sql END
              USING v_j.watermark;
            GET DIAGNOSTICS v_late = ROW_COUNT;
        END IF;
        IF v_left THEN
            EXECUTE v_j.pair_left_sql USING v_j.watermark, v_lo - v_j.before, v_hi + v_j.after;
        ELSE
            EXECUTE v_j.pair_right_sql USING v_j.watermark, v_lo - v_j.after, v_hi + v_j.before;
        END IF;
        GET DIAGNOSTICS v_pairs = ROW_COUNT;
        UPDATE slidewin.joins
           SET pairs = pairs + v_pairs,
               late_left = late_left + CASE WHEN v_left THEN v_late ELSE 0 END,
               late_right = late_right + CASE WHEN v_left THEN 0 ELSE v_late END
         WHERE name = v_j.name;
        IF v_pairs > 0 THEN
            PERFORM pg_notify('slidewin_joins', v_j.name);
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
