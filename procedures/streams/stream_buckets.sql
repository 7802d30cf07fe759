-- slidewin.stream_buckets(stream, measure, step, from, to, key): one measure of a declared
-- stream summed into buckets of `step` seconds (aligned to the epoch) over [from, to): rows n,
-- values cnt, the exact sum of the finite values, min and max, and the NaN/+Inf/-Inf counts.
-- min and max come as vmin/vmax (numeric) for integer and numeric measures and as fmin/fmax
-- (double precision) for doubles, so that a window turns its one min and max into numeric
-- rather than every bucket's.
-- Without a key: from the rollups, reading the seconds asked for, never the table: step 1 reads
-- the second rollups as they are; a step of whole minutes over a range of whole minutes reads the
-- minute grain; step 0 returns rows to be summed whole (not buckets): the range's whole minutes
-- from the minute grain and the seconds around them. With p_key: the buckets of that key alone, from its own raw
-- rows: the range's rows of the one partition holding the key (its primary key (time, key)).
CREATE OR REPLACE FUNCTION slidewin.stream_buckets(
    p_stream text, p_measure text, p_step integer, p_from timestamptz, p_to timestamptz,
    p_key text DEFAULT NULL)
RETURNS TABLE (bucket timestamptz, n bigint, cnt bigint, total numeric, vmin numeric,
               vmax numeric, fmin double precision, fmax double precision, nan bigint,
               pinf bigint, ninf bigint)
LANGUAGE plpgsql STABLE
SET extra_float_digits = 1  -- the key path sums the doubles' shortest round-trip decimals
AS $$
DECLARE
    v_m    record := slidewin.stream_measure(p_stream, p_measure);
    v_dbl  boolean := v_m.type = 'double precision';
    v_ext  text;
    v_odd  text;
    v_s    slidewin.streams;
    v_aggs text;
    v_rows text;
    v_table text;
    v_lo   timestamptz;
    v_hi   timestamptz;
    -- slidewin.grain_floor, inline: date_bin for times since the epoch (a function call per
    -- row cost several times the aggregation)
    v_floor text := 'CASE WHEN %1$s >= ''epoch'' THEN date_bin(make_interval(secs => $1), %1$s, '
                    '''epoch'') ELSE slidewin.grain_floor(%1$s, $1) END';
BEGIN
    IF p_key IS NULL THEN
        v_ext := CASE WHEN v_dbl THEN 'NULL::numeric, NULL::numeric, %1$s(%3$I), %2$s(%4$I)'
                      ELSE '%1$s(%3$I)::numeric, %2$s(%4$I)::numeric, NULL::float8, NULL::float8'
                 END;
        v_odd := CASE WHEN v_dbl THEN format('%%1$s(%I)::bigint, %%1$s(%I)::bigint, '
                                             '%%1$s(%I)::bigint', v_m.measure || '_nan',
                                             v_m.measure || '_pinf', v_m.measure || '_ninf')
                      ELSE '0::bigint, 0::bigint, 0::bigint' END;
        -- a grain's rows as they are (one per second or minute), for [$2, $3)
        v_rows := format(
            'SELECT sec, n, %1$I, %2$I, %3$s, %4$s FROM slidewin_rollups.%%I '
            'WHERE sec >= %%s AND sec < %%s',
            v_m.measure || '_n', v_m.measure || '_sum',
            format(v_ext, '', '', v_m.measure || '_min', v_m.measure || '_max'),
            format(v_odd, ''));
        IF p_step = 0 THEN
            -- rows to be summed whole: the range's whole minutes from the minute grain, the
            -- seconds before and after them from the second grain (at most 118 of those)
            v_lo := date_trunc('minute', p_from, 'UTC');
            IF v_lo < p_from THEN
                v_lo := v_lo + interval '1 minute';
            END IF;
            v_hi := date_trunc('minute', p_to, 'UTC');
            IF v_lo >= v_hi THEN
                RETURN QUERY EXECUTE format(v_rows, p_stream, '$2', '$3') USING p_step, p_from,
                    p_to;
            ELSE
                RETURN QUERY EXECUTE format(v_rows, p_stream, '$2', '$4') || ' UNION ALL '
                    || format(v_rows, p_stream || '#minute', '$4', '$5') || ' UNION ALL '
                    || format(v_rows, p_stream, '$5', '$3')
                    USING p_step, p_from, p_to, v_lo, v_hi;
            END IF;
            RETURN;
        END IF;
        IF p_step = 1 THEN  -- one rollup row per second already: no grouping
            RETURN QUERY EXECUTE format(v_rows, p_stream, '$2', '$3') || ' ORDER BY sec'
                USING p_step, p_from, p_to;
            RETURN;
        END IF;
        -- whole minutes from the minute grain when the buckets and the range allow it
        v_table := CASE WHEN p_step % 60 = 0 AND date_trunc('minute', p_from, 'UTC') = p_from
                              AND date_trunc('minute', p_to, 'UTC') = p_to
                         THEN p_stream || '#minute' ELSE p_stream END;
        RETURN QUERY EXECUTE format(
            'SELECT ' || format(v_floor, 'sec') || ', sum(n)::bigint, sum(%1$I)::bigint, '
            'sum(%2$I), %3$s, %4$s FROM slidewin_rollups.%5$I '
            'WHERE sec >= $2 AND sec < $3 GROUP BY 1 ORDER BY 1',
            v_m.measure || '_n', v_m.measure || '_sum',
            format(v_ext, 'min', 'max', v_m.measure || '_min', v_m.measure || '_max'),
            format(v_odd, 'sum'), v_table)
        USING p_step, p_from, p_to;
        RETURN;
    END IF;
    v_s := slidewin.stream_get(p_stream);
    IF v_dbl THEN
        v_aggs := format(
            'coalesce(sum(%1$I::text::numeric) FILTER (WHERE %1$I NOT IN (%2$L, %3$L, %4$L)), 0), '
            'NULL::numeric, NULL::numeric, min(%1$I) FILTER (WHERE %1$I <> %2$L), '
            'max(%1$I) FILTER (WHERE %1$I <> %2$L), '
            'count(*) FILTER (WHERE %1$I = %2$L), count(*) FILTER (WHERE %1$I = %3$L), '
            'count(*) FILTER (WHERE %1$I = %4$L)',
            v_m.measure, 'NaN', 'Infinity', '-Infinity');
    ELSE
        v_aggs := format('coalesce(sum(%1$I::numeric), 0), min(%1$I)::numeric, '
                         'max(%1$I)::numeric, NULL::float8, NULL::float8, 0::bigint, 0::bigint, '
                         '0::bigint', v_m.measure);
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT ' || format(v_floor, format('%I', v_s.time_column))
        || ', count(*)::bigint, count(%2$I)::bigint, %3$s '
        'FROM slidewin_streams.%4$I WHERE %5$I = $4::%6$s AND %1$I >= $2 AND %1$I < $3 '
        'GROUP BY 1 ORDER BY 1',
        v_s.time_column, v_m.measure, v_aggs, p_stream, v_s.key_column,
        (SELECT c->>'type' FROM jsonb_array_elements(v_s.columns) c
          WHERE c->>'name' = v_s.key_column))
    USING p_step, p_from, p_to, p_key;
END
$$;
