-- slidewin.sessions_late(p_def_id, p_uuid, p_val, p_ts): dead-letter events that are late for a
-- session window -- reason `late`, source `session:NAME`, the sentence of
-- slidewin.session_late_detail -- and count them in the definition's late counter. The events
-- themselves stay stored (and in the rollups): they are late for this definition only. Returns
-- how many were dead-lettered. Callers pass the events older than base_ts - grace
-- (slidewin.session_begin). The dead letter names the definition's stream, and its raw record
-- the stream's key, measure and time columns (events': uuid, val, ts).
CREATE OR REPLACE FUNCTION slidewin.sessions_late(
    p_def_id integer, p_uuid text[], p_val bigint[], p_ts timestamptz[])
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_def  slidewin.session_defs := slidewin.session_begin(p_def_id);
    v_key  text;
    v_time text;
    v_n    bigint;
BEGIN
    IF v_def.id IS NULL OR coalesce(cardinality(p_uuid), 0) = 0 THEN
        RETURN 0;
    END IF;
    SELECT coalesce(max(s.key_column), 'uuid'), coalesce(max(s.time_column), 'ts')
      INTO v_key, v_time
      FROM slidewin.streams s WHERE s.name = v_def.stream;
    INSERT INTO slidewin.dead_letters (source, reason, detail, raw, event_ts, stream)
    SELECT 'session:' || v_def.name, 'late', slidewin.session_late_detail(v_def, x.ts),
           CASE WHEN v_def.measure IS NULL THEN json_build_object(v_key, x.uuid, v_time, x.ts)
                ELSE json_build_object(v_key, x.uuid, v_def.measure, x.val, v_time, x.ts)
           END::text, x.ts, v_def.stream
      FROM unnest(p_uuid, p_val, p_ts) AS x(uuid, val, ts);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    UPDATE slidewin.session_defs SET late = late + v_n WHERE id = v_def.id;
    RETURN v_n;
END
$$;
