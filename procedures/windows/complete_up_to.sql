-- slidewin.complete_up_to(): the watermark -- no event the ingest can still accept is older than
-- this, so a window ending at or before it is final (Kafka's close rule: end <= stream time -
-- grace). The ingest rejects anything older as `late`; the watermark never goes back
-- (slidewin.ingest_advance). NULL when no ingest has recorded its grace: rows written by other
-- means (psql, slidewin.insert_event) have no late rule, so nothing is final. The built-in
-- stream's own watermark (its stream_state row, `events`): a declared stream's is its own
-- (slidewin.stream_window_state), and one never moves the other's.
CREATE OR REPLACE FUNCTION slidewin.complete_up_to()
RETURNS timestamptz
LANGUAGE sql STABLE
AS $$
    SELECT max(watermark) FROM slidewin.stream_state WHERE stream = 'events'
$$;
