-- slidewin.join_nibble(name, now, chunk): retention for an interval join's results -- delete at
-- most chunk of its oldest results (and records late for it) whose inputs have both aged out:
-- ts older than now - the longer of the two streams' histories (for events: than its oldest
-- stored second), and than what W lets the
-- streams' retention delete (W - the larger of before and after: slidewin.stream_nibble). A result
-- stays while either of its records may still be stored; a stream kept forever keeps its join's
-- results too. Returns
-- the rows deleted; call again while it returns chunk. Bounded by the chunk (the ts index).
CREATE OR REPLACE FUNCTION slidewin.join_nibble(p_name text, p_now timestamptz,
                                                p_chunk integer DEFAULT 10000)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    v_j    slidewin.joins := slidewin.join_get(p_name);
    v_gone timestamptz;
    v_n    bigint;
    v_late bigint;
    v_cut  timestamptz;
BEGIN
    IF p_now IS NULL OR p_chunk IS NULL OR p_chunk < 1 THEN
        RAISE EXCEPTION 'now and a chunk of 1 or more are required (got %, %)', p_now, p_chunk
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- per stream, the time before which its records may be gone: a declared stream's now -
    -- history (none: kept forever), events' oldest second still stored (its retention follows
    -- policies, not a history; the rollups' primary key gives it at once)
    SELECT CASE WHEN bool_or(g IS NULL) THEN NULL ELSE min(g) END INTO v_gone
      FROM (SELECT CASE WHEN s.builtin
                        THEN coalesce((SELECT min(sec) FROM slidewin.rollups), 'infinity')
                        ELSE p_now - s.history END AS g
              FROM slidewin.streams s WHERE s.name IN (v_j.left_stream, v_j.right_stream)) h;
    IF v_j.kind <> 'interval' OR v_gone IS NULL THEN
        RETURN 0;
    END IF;
    v_cut := least(v_gone,
                   coalesce(v_j.watermark, '-infinity') - greatest(v_j.before, v_j.after));
    EXECUTE format('WITH gone AS (DELETE FROM slidewin_joins.%1$I j WHERE j.seq IN (SELECT seq '
                   'FROM slidewin_joins.%1$I WHERE ts < $1 ORDER BY ts LIMIT $2) RETURNING 1) '
                   'SELECT count(*) FROM gone', v_j.name)
      INTO v_n USING v_cut, p_chunk;
    EXECUTE format('WITH gone AS (DELETE FROM slidewin_joins.%1$I x WHERE (x.side, x.ts, x.key) '
                   'IN (SELECT side, ts, key FROM slidewin_joins.%1$I WHERE ts < $1 LIMIT $2) '
                   'RETURNING 1) SELECT count(*) FROM gone', v_j.name || '#late')
      INTO v_late USING v_cut, p_chunk;
    RETURN v_n + v_late;
END
$$;
