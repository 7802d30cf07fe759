-- slidewin.partition_of(p_uuid): partition of a key under the store's current partition count.
CREATE OR REPLACE FUNCTION slidewin.partition_of(p_uuid text)
RETURNS smallint
LANGUAGE sql STABLE STRICT
AS $$
    SELECT slidewin.partition_of(p_uuid, c.partitions) FROM slidewin.config c
$$;
