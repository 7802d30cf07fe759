-- slidewin.joins_advance(stream, now): slidewin.join_advance for every join keeping a
-- watermark -- interval joins, and asof joins of a table -- reading the stream (NULL: every such
-- join), in name order -- what each batch of a stream runs in its
-- own transaction after raising the stream's time, and what the scheduler runs on its tick, so
-- that an input gone idle still lets results become final. Returns the joins advanced.
CREATE OR REPLACE FUNCTION slidewin.joins_advance(p_stream text, p_now timestamptz DEFAULT now())
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    v_name text;
    v_n    integer := 0;
BEGIN
    FOR v_name IN SELECT name FROM slidewin.joins
                   WHERE (kind = 'interval' OR right_table)
                     AND (p_stream IS NULL OR p_stream IN (left_stream, right_stream))
                   ORDER BY name LOOP
        PERFORM slidewin.join_advance(v_name, p_now);
        v_n := v_n + 1;
    END LOOP;
    RETURN v_n;
END
$$;
