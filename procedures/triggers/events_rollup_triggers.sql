-- The rollup triggers on the parent slidewin.events (partitions get theirs in ensure_partitions).
SELECT slidewin.attach_rollup_triggers('slidewin.events'::regclass);
