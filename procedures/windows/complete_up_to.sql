-- slidewin.complete_up_to(): the watermark -- no event the ingest can still accept is older than
-- this, so a window ending at or before it is final (Kafka's close rule: end <= stream time -
-- grace). The ingest rejects ts < newest - grace as `late`; newest and grace are those it
-- recorded in slidewin.stream_state. NULL when no ingest has recorded its grace: rows written
-- by other means (psql, slidewin.insert_event) have no late rule, so nothing is final.
CREATE OR REPLACE FUNCTION slidewin.complete_up_to()
RETURNS timestamptz
LANGUAGE sql STABLE
AS $$
    SELECT max(newest_ts - grace) FROM slidewin.stream_state WHERE grace IS NOT NULL
$$;
