-- slidewin.join_lock_streams(left, right): what slidewin.join_define and slidewin.join_drop take
-- before they create or drop a stream's join triggers, until the commit -- the streams' registry
-- rows (a declared stream's batch holds its row FOR SHARE from its start) and their state rows
-- (which every batch locks first thing: the built-in ingest takes no registry row). So a batch
-- running now commits first, and one starting now waits: neither ever holds a partition the
-- triggers' DDL wants while waiting for one the DDL holds (events is written partition by
-- partition), and a batch's rows are paired by the definition or by the triggers, never by
-- neither. A state row is made when missing, so that a first batch starting meanwhile waits on
-- it too.
CREATE OR REPLACE FUNCTION slidewin.join_lock_streams(p_left text, p_right text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM 1 FROM slidewin.streams WHERE name IN (p_left, p_right) ORDER BY name FOR UPDATE;
    INSERT INTO slidewin.stream_state (stream)
    SELECT DISTINCT s FROM unnest(ARRAY[p_left, p_right]) s ON CONFLICT DO NOTHING;
    PERFORM 1 FROM slidewin.stream_state WHERE stream IN (p_left, p_right) ORDER BY stream
        FOR UPDATE;
END
$$;
