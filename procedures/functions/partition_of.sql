-- slidewin.partition_of(p_uuid, p_partitions): the partition an event key belongs to.
--
-- Contract: first 32 bits of md5(uuid) as an unsigned integer, modulo the partition count.
-- The same formula runs in Python (db.events.partition_of) and in Spark (ingest), so all three
-- agree. IMMUTABLE for a given count; the one-argument form reads slidewin.config.
CREATE OR REPLACE FUNCTION slidewin.partition_of(p_uuid text, p_partitions integer)
RETURNS smallint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT ((('x' || substr(md5(p_uuid), 1, 8))::bit(32)::bigint) % p_partitions)::smallint
$$;
