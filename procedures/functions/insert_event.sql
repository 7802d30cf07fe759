-- slidewin.insert_event(p_uuid, p_val, p_ts): insert one event into its partition; a duplicate
-- (uuid, ts) changes nothing. Returns the partition. The rollup trigger counts it.
CREATE OR REPLACE FUNCTION slidewin.insert_event(p_uuid text, p_val bigint, p_ts timestamptz)
RETURNS smallint
LANGUAGE plpgsql
AS $$
DECLARE
    v_part smallint;
BEGIN
    IF p_uuid IS NULL OR p_val IS NULL OR p_ts IS NULL THEN
        RAISE EXCEPTION 'p_uuid, p_val and p_ts must not be NULL, got (%, %, %)',
            coalesce(p_uuid, 'NULL'), coalesce(p_val::text, 'NULL'), coalesce(p_ts::text, 'NULL')
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_part := slidewin.partition_of(p_uuid);
    INSERT INTO slidewin.events (part, uuid, val, ts) VALUES (v_part, p_uuid, p_val, p_ts)
        ON CONFLICT DO NOTHING;
    RETURN v_part;
END
$$;
