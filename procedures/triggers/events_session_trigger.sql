-- The session trigger on the parent slidewin.events (partitions get theirs in ensure_partitions).
SELECT slidewin.attach_session_trigger('slidewin.events'::regclass);
