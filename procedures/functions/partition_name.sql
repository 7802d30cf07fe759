-- slidewin.partition_name(p_part): the table of partition p_part in schema slidewin, events_pNNN.
--
-- The one owner of the naming rule in SQL (db/limits.py owns it in Python): three digits, so at
-- most 1000 partitions, events_p000 .. events_p999 (ensure_partitions and slidewin.config's
-- CHECK hold the count there). An IMMUTABLE SQL function: the planner inlines it, so the hot
-- callers (nibble) pay nothing for the call.
CREATE OR REPLACE FUNCTION slidewin.partition_name(p_part integer)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT 'events_p' || lpad(p_part::text, 3, '0')
$$;
