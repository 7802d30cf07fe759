-- slidewin.join_tables(name): an interval join's tables (an asof join of a table: its late
-- records' alone).
--   slidewin_joins.<name>: one row per result -- seq (the order results were written: what
--     --follow resumes from), ts (the later of the two records' times; an outer row's own record
--     time), emitted_at (when it was written), then l_<column> and r_<column> for the columns
--     kept, NULL on the missing side of an outer row. Indexed on seq and ts only: each result is
--     found once by construction (the join's lock, the streams' identity), and what an outer row
--     must check -- is there a pair? -- is read through the ts index (a pair's ts is within
--     before/after of its records').
--   slidewin_joins."<name>#late": the records late for the join (side 'l' or 'r', time, key).
CREATE OR REPLACE FUNCTION slidewin.join_tables(p_name text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    v_j    slidewin.joins := slidewin.join_get(p_name);
    v_l    slidewin.streams := slidewin.stream_row(v_j.left_stream);
    v_r    slidewin.streams := slidewin.stream_row(v_j.right_stream);
    v_defs text;
BEGIN
    SELECT string_agg(format('%I %s', 'l_' || c,
                             CASE WHEN c = 'attrs' THEN 'jsonb'
                                  ELSE slidewin.join_column_type(v_l, c, 'select') END), ', ')
      INTO v_defs FROM unnest(v_j.select_left) c;
    SELECT v_defs || ', ' || string_agg(format('%I %s', 'r_' || c,
                             CASE WHEN c = 'attrs' THEN 'jsonb'
                                  ELSE slidewin.join_column_type(v_r, c, 'select') END), ', ')
      INTO v_defs FROM unnest(v_j.select_right) c;
    IF v_j.kind = 'interval' THEN
        EXECUTE format('CREATE TABLE slidewin_joins.%I (seq bigint GENERATED ALWAYS AS '
                       'IDENTITY PRIMARY KEY, ts timestamptz NOT NULL, emitted_at timestamptz '
                       'NOT NULL DEFAULT clock_timestamp(), %s)', v_j.name, v_defs);
        EXECUTE format('CREATE INDEX %I ON slidewin_joins.%I (ts)', v_j.name || '#ts', v_j.name);
    END IF;
    EXECUTE format('CREATE TABLE slidewin_joins.%I (side "char" NOT NULL CHECK (side IN '
                   '(''l'', ''r'')), ts timestamptz NOT NULL, key text NOT NULL, '
                   'PRIMARY KEY (ts, key, side))', v_j.name || '#late');
END
$$;
