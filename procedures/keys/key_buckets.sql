-- slidewin.key_buckets(p_key, p_step, p_from, p_to): one key's events in [p_from, p_to) summed
-- per bucket of p_step seconds (aligned to the epoch): the per-key counterpart of
-- slidewin.rollup_buckets, read from the raw rows of that key alone (the index events_key_ts,
-- when slidewin.key_index(true) has made it; else the range of every partition).
CREATE OR REPLACE FUNCTION slidewin.key_buckets(
    p_key text, p_step integer, p_from timestamptz, p_to timestamptz)
RETURNS TABLE (bucket timestamptz, n bigint, total numeric, vmin bigint, vmax bigint)
LANGUAGE sql STABLE
AS $$
    SELECT slidewin.grain_floor(e.ts, p_step), count(*), sum(e.val), min(e.val), max(e.val)
      FROM slidewin.events e
     WHERE e.uuid = p_key AND e.ts >= p_from AND e.ts < p_to
     GROUP BY 1
$$;
