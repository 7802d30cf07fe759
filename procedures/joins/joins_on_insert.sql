-- slidewin.joins_on_insert(): AFTER INSERT statement trigger of a stream an interval join reads
-- (TG_ARGV[0]: the stream). For each such join, in name order (one lock order for every writer):
-- lock its registry row -- batches of the two streams take turns, so of two records written
-- concurrently the later transaction sees the earlier one's commit and pairs them, exactly once --
-- then record the new rows older than W as late, pair the others with the other stream's stored
-- rows in the time range they can match (pair_*_sql: the batch's times widened by before and
-- after), count, and signal channel slidewin_joins with the join's name. Any insert (the
-- ingest's or a psql user's) is joined the same way. A self-join's stream is both sides: its
-- new rows are paired as left records with the stream (the batch included) and as right records
-- with the rows stored before the batch (slidewin.join_sql), so each ordered pair once.
-- An asof join of a table (right_table) reads its answers when asked: of a batch of its right
-- stream only the versions older than W are recorded, as late (left out of every answer).
CREATE OR REPLACE FUNCTION slidewin.joins_on_insert()
RETURNS trigger
LANGUAGE plpgsql
SET jit = off  -- compiling a batch's statements costs more than it saves
-- the pairs' hash join on (on-column, time bin) (slidewin.join_sql): the transition table and
-- a batch's new records carry no statistics, and a merge join sorting both sides or a nested
-- loop probing the late records per pair is what the guesses pick otherwise
SET enable_mergejoin = off
SET enable_nestloop = off
AS $$
DECLARE
    v_j     slidewin.joins;
    v_left  boolean;
    v_right boolean;
    v_late_l bigint;
    v_late_r bigint;
    v_pairs bigint;
    v_n     bigint;
    v_time  text := (SELECT time_column FROM slidewin.streams WHERE name = TG_ARGV[0]);
    v_lo    timestamptz;
    v_hi    timestamptz;
BEGIN
    EXECUTE format('SELECT min(%1$I), max(%1$I) FROM new_rows', v_time) INTO v_lo, v_hi;
    IF v_lo IS NULL THEN
        RETURN NULL;
    END IF;
    FOR v_j IN SELECT * FROM slidewin.joins
                WHERE (kind = 'interval' AND TG_ARGV[0] IN (left_stream, right_stream))
                   OR (right_table AND right_stream = TG_ARGV[0])
                ORDER BY name FOR UPDATE LOOP
        v_left := v_j.left_stream = TG_ARGV[0];
        v_right := v_j.right_stream = TG_ARGV[0];
        v_late_l := 0;
        v_late_r := 0;
        v_pairs := 0;
        IF v_j.kind = 'asof' THEN
            IF v_j.watermark IS NOT NULL THEN
                EXECUTE v_j.late_right_sql USING v_j.watermark;
                GET DIAGNOSTICS v_late_r = ROW_COUNT;
                UPDATE slidewin.joins SET late_right = late_right + v_late_r
                 WHERE name = v_j.name;
            END IF;
            CONTINUE;
        END IF;
        -- the late records first, both sides' for a self-join: the pairs leave them out
        IF v_j.watermark IS NOT NULL AND v_left THEN
            EXECUTE v_j.late_left_sql USING v_j.watermark;
            GET DIAGNOSTICS v_late_l = ROW_COUNT;
        END IF;
        IF v_j.watermark IS NOT NULL AND v_right THEN
            EXECUTE v_j.late_right_sql USING v_j.watermark;
            GET DIAGNOSTICS v_late_r = ROW_COUNT;
        END IF;
        IF v_left THEN
            EXECUTE v_j.pair_left_sql USING v_j.watermark, v_lo - v_j.before, v_hi + v_j.after;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            v_pairs := v_n;
        END IF;
        IF v_right THEN
            EXECUTE v_j.pair_right_sql USING v_j.watermark, v_lo - v_j.after, v_hi + v_j.before;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            v_pairs := v_pairs + v_n;
        END IF;
        UPDATE slidewin.joins
           SET pairs = pairs + v_pairs, late_left = late_left + v_late_l,
               late_right = late_right + v_late_r
         WHERE name = v_j.name;
        IF v_pairs > 0 THEN
            PERFORM pg_notify('slidewin_joins', v_j.name);
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
