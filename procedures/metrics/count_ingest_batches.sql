-- slidewin.count_ingest_batches(): AFTER INSERT OR UPDATE row trigger on slidewin.ingest_batches,
-- raising the ingest's counters by stream in the batch's own transaction, so /metrics reads a
-- handful of counter rows instead of summing every batch ever committed:
--   ingest_batches            one per batch marker inserted
--   ingest_events_accepted    the batch's accepted, duplicates and rejected as the sink sets
--   ingest_events_duplicate   them (an UPDATE adds what it adds to the row; counters never go
--   ingest_records_rejected   down, so a lowered figure adds nothing)
-- The stream is the query id's second part as the sinks write it ('stream-<name>' for a
-- declared stream, else the built-in events), as client.answers.store.BATCH_STREAM_SQL reads it.
CREATE OR REPLACE FUNCTION slidewin.count_ingest_batches()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_part   text := split_part(NEW.query_id, '/', 2);
    v_labels jsonb := jsonb_build_object(
        'stream', CASE WHEN starts_with(v_part, 'stream-') THEN substr(v_part, 8) ELSE 'events' END);
    v_new    boolean := TG_OP = 'INSERT';
BEGIN
    IF v_new THEN
        PERFORM slidewin.counter_add('ingest_batches', v_labels, 1);
    END IF;
    PERFORM slidewin.counter_add('ingest_events_accepted', v_labels,
                                 NEW.accepted - CASE WHEN v_new THEN 0 ELSE OLD.accepted END);
    PERFORM slidewin.counter_add('ingest_events_duplicate', v_labels,
                                 NEW.duplicates - CASE WHEN v_new THEN 0 ELSE OLD.duplicates END);
    PERFORM slidewin.counter_add('ingest_records_rejected', v_labels,
                                 NEW.rejected - CASE WHEN v_new THEN 0 ELSE OLD.rejected END);
    RETURN NULL;
END
$$;

-- a store made before these counters starts them from the batches it holds, once
INSERT INTO slidewin.counters (name, labels, value)
SELECT c.name, b.labels, c.value
  FROM (SELECT jsonb_build_object('stream', CASE WHEN starts_with(split_part(i.query_id, '/', 2),
                                                                  'stream-')
                                                 THEN substr(split_part(i.query_id, '/', 2), 8)
                                                 ELSE 'events' END) AS labels,
               count(*) AS batches, sum(i.accepted) AS accepted,
               sum(i.duplicates) AS duplicates, sum(i.rejected) AS rejected
          FROM slidewin.ingest_batches i GROUP BY 1) AS b,
       LATERAL (VALUES ('ingest_batches', b.batches), ('ingest_events_accepted', b.accepted),
                       ('ingest_events_duplicate', b.duplicates),
                       ('ingest_records_rejected', b.rejected)) AS c(name, value)
 WHERE c.value > 0
   AND NOT EXISTS (SELECT 1 FROM slidewin.counters k WHERE k.name = 'ingest_batches')
   AND NOT EXISTS (SELECT 1 FROM pg_trigger
                    WHERE tgname = 'ingest_batches_counted'
                      AND tgrelid = 'slidewin.ingest_batches'::regclass)
ON CONFLICT (name, labels) DO NOTHING;

CREATE OR REPLACE TRIGGER ingest_batches_counted
    AFTER INSERT OR UPDATE OF accepted, duplicates, rejected ON slidewin.ingest_batches
    FOR EACH ROW EXECUTE FUNCTION slidewin.count_ingest_batches();
