-- slidewin.stream_define(name, key, time, columns, measures, keep_extra, partitions, history,
-- grace, is_table, max_rows): declare a stream and create its tables in one transaction.
-- history (NULL: forever) more than 0, grace 0 or more, each at most 100 years, history at
-- least grace + 1 s.
-- is_table: the stream is a table -- versioned rows by key, kept with no retention (its history
-- must be unset: every version stays, so that an as-of join's answer for an old record never
-- changes; slidewin.joins, slidewin.stream_nibble). max_rows (NULL: none): the row limit --
-- retention keeps the newest max_rows rows besides the history (slidewin.stream_nibble); 1 or
-- more, never for a table (slidewin.stream_check_retention).
--
-- columns: a jsonb array of {"name": ..., "type": ..., "required": true|false} in table order;
-- the key (text, bigint or integer) and the time column (timestamptz; added when not listed) are
-- always required. measures: numeric columns (bigint, integer, double precision, numeric) the
-- rollups keep. keep_extra adds `attrs jsonb` for fields the stream does not declare.
-- Creates slidewin_streams.<name> (identity: time and key, as (ts, uuid) for events; its primary
-- key is the time index too), hash partitioned on the key into slidewin_streams."<name>#<i>";
-- slidewin_rollups.<name> and its minute grain slidewin_rollups."<name>#minute"; the rollup
-- triggers; and the session trigger (slidewin.session_triggers). Every name goes through
-- slidewin.check_stream_name and format('%I'): a name with quotes or semicolons is refused,
-- never executed. Returns the stream's row.
-- the signatures before is_table and before max_rows: dropped, so that a call is never
-- ambiguous between them
DROP FUNCTION IF EXISTS slidewin.stream_define(text, text, text, jsonb, text[], boolean, integer,
                                               interval, interval);
DROP FUNCTION IF EXISTS slidewin.stream_define(text, text, text, jsonb, text[], boolean, integer,
                                               interval, interval, boolean);
CREATE OR REPLACE FUNCTION slidewin.stream_define(
    p_name text, p_key text, p_time text, p_columns jsonb, p_measures text[] DEFAULT '{}',
    p_keep_extra boolean DEFAULT false, p_partitions integer DEFAULT 4,
    p_history interval DEFAULT NULL, p_grace interval DEFAULT interval '0',
    p_is_table boolean DEFAULT false, p_max_rows bigint DEFAULT NULL)
RETURNS slidewin.streams
LANGUAGE plpgsql
AS $$
DECLARE
    v_cols   jsonb := '[]'::jsonb;
    v_c      jsonb;
    v_n      text;
    v_t      text;
    v_defs   text[] := '{}'::text[];
    v_rdefs  text[] := ARRAY['sec timestamptz PRIMARY KEY CHECK (sec = date_trunc(''second'', '
                             'sec, ''UTC''))', 'n bigint NOT NULL CHECK (n >= 0)'];
    v_m      text;
    v_row    slidewin.streams;
BEGIN
    PERFORM slidewin.check_stream_name('stream', p_name);
    IF p_name = 'events' OR EXISTS (SELECT 1 FROM slidewin.streams WHERE name = p_name) THEN
        RAISE EXCEPTION 'stream % exists already', p_name
            USING ERRCODE = 'duplicate_object',
                  HINT = 'pick another name, or drop it first (slidewin streams drop NAME --yes)';
    END IF;
    PERFORM slidewin.check_stream_name('key column', p_key);
    PERFORM slidewin.check_stream_name('time column', p_time);
    IF p_key = p_time THEN
        RAISE EXCEPTION 'the key and the time column are both %', p_key
            USING ERRCODE = 'invalid_parameter_value', HINT = 'name two different columns';
    END IF;
    IF p_columns IS NULL OR jsonb_typeof(p_columns) <> 'array' THEN
        RAISE EXCEPTION 'columns must be a JSON array of {"name": ..., "type": ...}'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_partitions IS NULL OR p_partitions NOT BETWEEN 1 AND 64 THEN
        RAISE EXCEPTION 'partitions must be 1 to 64, got %', coalesce(p_partitions::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- bounded up front (0 .. 100 years, slidewin.check_duration), and history >= grace + 1 s
    -- (slidewin.stream_check_retention, which the INSERT below runs again for every writer)
    PERFORM slidewin.check_duration('history', p_history, false);
    PERFORM slidewin.check_duration('grace', p_grace);
    IF p_is_table IS NULL THEN
        RAISE EXCEPTION 'is_table of stream % is missing', p_name
            USING ERRCODE = 'invalid_parameter_value', HINT = 'give true (a table) or false';
    END IF;
    -- the columns, canonical and checked; the time column is added when not listed
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(p_columns) c WHERE c->>'name' = p_time) THEN
        p_columns := p_columns || jsonb_build_array(
            jsonb_build_object('name', p_time, 'type', 'timestamptz'));
    END IF;
    FOR v_c IN SELECT * FROM jsonb_array_elements(p_columns) LOOP
        IF jsonb_typeof(v_c) <> 'object' THEN
            RAISE EXCEPTION 'column % is not an object {"name": ..., "type": ...}', v_c
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_n := slidewin.check_stream_name('column', v_c->>'name');
        IF v_n = 'attrs' AND p_keep_extra THEN
            RAISE EXCEPTION 'column attrs is where keep_extra keeps undeclared fields'
                USING ERRCODE = 'invalid_parameter_value', HINT = 'name the column otherwise';
        END IF;
        IF v_cols @> jsonb_build_array(jsonb_build_object('name', v_n)) THEN
            RAISE EXCEPTION 'column % is declared twice', v_n
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_t := slidewin.stream_type(v_n, coalesce(v_c->>'type', 'text'));
        IF v_n = p_key AND v_t NOT IN ('text', 'bigint', 'integer') THEN
            RAISE EXCEPTION 'key column % has type %', v_n, v_t
                USING ERRCODE = 'invalid_parameter_value', HINT = 'a key is text, bigint or integer';
        END IF;
        IF v_n = p_time AND v_t <> 'timestamptz' THEN
            RAISE EXCEPTION 'time column % has type %', v_n, v_t
                USING ERRCODE = 'invalid_parameter_value', HINT = 'an event time is timestamptz';
        END IF;
        v_cols := v_cols || jsonb_build_array(jsonb_build_object(
            'name', v_n, 'type', v_t,
            'required', v_n IN (p_key, p_time) OR coalesce((v_c->>'required')::boolean, false)));
        v_defs := v_defs || format('%I %s%s', v_n, v_t,
            CASE WHEN v_n IN (p_key, p_time) OR coalesce((v_c->>'required')::boolean, false)
                 THEN ' NOT NULL' ELSE '' END);
    END LOOP;
    IF NOT v_cols @> jsonb_build_array(jsonb_build_object('name', p_key)) THEN
        RAISE EXCEPTION 'key column % is not among the columns', p_key
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('add {"name": "%s", "type": "text"} to the columns', p_key);
    END IF;
    IF p_keep_extra THEN
        v_defs := v_defs || 'attrs jsonb'::text;
    END IF;
    FOREACH v_m IN ARRAY coalesce(p_measures, '{}') LOOP
        v_t := slidewin.stream_measure_type(v_cols, v_m, p_key, p_time);
        v_rdefs := v_rdefs || slidewin.stream_measure_ddl(v_m, v_t);
    END LOOP;
    -- a table's history (none) is checked by slidewin.stream_check_retention, for every writer
    INSERT INTO slidewin.streams (name, key_column, time_column, columns, measures, keep_extra,
                                  partitions, history, grace, is_table, max_rows)
    VALUES (p_name, p_key, p_time, v_cols, coalesce(p_measures, '{}'), p_keep_extra,
            p_partitions, p_history, p_grace, p_is_table, p_max_rows);
    -- identity (time, key): time first, so that rows arriving in time order append to the
    -- index's right edge (a key-first index takes a random page per row: half the write rate),
    -- and the one index serves the nibble's oldest-first scan and the count windows' newest-first
    EXECUTE format('CREATE TABLE slidewin_streams.%I (%s, PRIMARY KEY (%I, %I)) '
                   'PARTITION BY HASH (%I)', p_name, array_to_string(v_defs, ', '),
                   p_time, p_key, p_key);
    FOR i IN 0 .. p_partitions - 1 LOOP
        EXECUTE format('CREATE TABLE slidewin_streams.%I PARTITION OF slidewin_streams.%I '
                       'FOR VALUES WITH (MODULUS %s, REMAINDER %s)',
                       p_name || '#' || i, p_name, p_partitions, i);
    END LOOP;
    EXECUTE format('CREATE TABLE slidewin_rollups.%I (%s)', p_name,
                   array_to_string(v_rdefs, ', '));
    EXECUTE format('CREATE TABLE slidewin_rollups.%I (%s)', p_name || '#minute',
                   array_to_string(v_rdefs, ', '));
    PERFORM slidewin.stream_rollup_sql(p_name);
    EXECUTE format('CREATE TRIGGER rollups_on_insert AFTER INSERT ON slidewin_streams.%I '
                   'REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT '
                   'EXECUTE FUNCTION slidewin.stream_rollups_on_insert(%L)', p_name, p_name);
    EXECUTE format('CREATE TRIGGER rollups_on_delete AFTER DELETE ON slidewin_streams.%I '
                   'REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT '
                   'EXECUTE FUNCTION slidewin.stream_rollups_on_delete(%L)', p_name, p_name);
    EXECUTE format('CREATE TRIGGER rollups_on_update AFTER UPDATE ON slidewin_streams.%I '
                   'REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT '
                   'EXECUTE FUNCTION slidewin.stream_rollups_on_delete(%L)', p_name, p_name);
    EXECUTE format('CREATE TRIGGER rollups_on_truncate AFTER TRUNCATE ON slidewin_streams.%I '
                   'FOR EACH STATEMENT EXECUTE FUNCTION slidewin.stream_rollups_on_truncate(%L)',
                   p_name, p_name);
    PERFORM slidewin.session_triggers(p_name);  -- its session windows, once one is defined
    SELECT * INTO v_row FROM slidewin.streams WHERE name = p_name;
    PERFORM slidewin.regrant_roles();  -- the new tables get each role set's grants
    RETURN v_row;
END
$$;
