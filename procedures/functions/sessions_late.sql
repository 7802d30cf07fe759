-- slidewin.sessions_late(p_def_id, p_uuid, p_val, p_ts): dead-letter events that are late for a
-- session window -- reason `late`, source `session:NAME`, the sentence of
-- slidewin.session_late_detail -- and count them in the definition's late counter. The events
-- themselves stay stored (and in the rollups): they are late for this definition only. Returns
-- how many were dead-lettered. Callers pass the events older than base_ts - grace
-- (slidewin.session_begin).
CREATE OR REPLACE FUNCTION slidewin.sessions_late(
    p_def_id integer, p_uuid text[], p_val bigint[], p_ts timestamptz[])
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_def slidewin.session_defs := slidewin.session_begin(p_def_id);
    v_n   bigint;
BEGIN
    IF v_def.id IS NULL OR coalesce(cardinality(p_uuid), 0) = 0 THEN
        RETURN 0;
    END IF;
    INSERT INTO slidewin.dead_letters (source, reason, detail, raw, event_ts)
    SELECT 'session:' || v_def.name, 'late', slidewin.session_late_detail(v_def, x.ts),
           json_build_object('uuid', x.uuid, 'val', x.val, 'ts', x.ts)::text, x.ts
      FROM unnest(p_uuid, p_val, p_ts) AS x(uuid, val, ts);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    UPDATE slidewin.session_defs SET late = late + v_n WHERE id = v_def.id;
    RETURN v_n;
END
$$;
