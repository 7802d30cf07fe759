-- slidewin.key_index(p_on): turn the per-key access path on (true) or off (false); returns
-- whether it is on afterwards (NULL: only report). The path is the index events_key_ts on
-- slidewin.events (uuid, ts) INCLUDE (val): on the partitioned parent, so every partition --
-- and every partition added later -- has it. With it, a key's windows read only that key's
-- events in the range (one index range per partition); without it they read every event in
-- the range and keep the key's. Opt-in because every insert then maintains one more index
-- (`slidewin bench sessions` measures the cost). Building it reads the whole table once and
-- blocks writes meanwhile; dropping it is immediate.
CREATE OR REPLACE FUNCTION slidewin.key_index(p_on boolean DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql
AS $$
BEGIN
    IF p_on THEN
        CREATE INDEX IF NOT EXISTS events_key_ts ON slidewin.events (uuid, ts) INCLUDE (val);
    ELSIF NOT p_on THEN
        DROP INDEX IF EXISTS slidewin.events_key_ts;
    END IF;
    RETURN to_regclass('slidewin.events_key_ts') IS NOT NULL;
END
$$;
