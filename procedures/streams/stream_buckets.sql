-- slidewin.stream_buckets(stream, measure, step, from, to, key): one measure of a stream summed
-- into buckets of `step` seconds (aligned to the epoch) over [from, to): rows n, values cnt, the
-- exact sum of the finite values, min and max, and the NaN/+Inf/-Inf counts. min and max come as
-- vmin/vmax (numeric) for integer and numeric measures and as fmin/fmax (double precision) for
-- doubles, so that a window turns its one min and max into numeric rather than every bucket's.
-- Without a key: from the rollups, reading the seconds asked for, never the table -- from the
-- coarsest of the stream's grains that divides the step and both ends (slidewin.stream_grains,
-- slidewin.stream_rollups); step 0 returns rows to be summed whole (not buckets): the range's
-- whole minutes and the seconds around them (for the built-in events, its four grains' totals
-- from slidewin.rollup_range, as one row). With p_key: the buckets of that key
-- alone, from its own raw rows: the range's rows of the one partition holding the key.
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
    v_s    slidewin.streams := slidewin.stream_row(p_stream);
    v_g    integer;
    v_aggs text;
    v_lo   timestamptz;
    v_hi   timestamptz;
    -- slidewin.grain_floor, inline: date_bin for times since the epoch (a function call per
    -- row cost several times the aggregation)
    v_floor text := 'CASE WHEN %1$s >= ''epoch'' THEN date_bin(make_interval(secs => $1), %1$s, '
                    '''epoch'') ELSE slidewin.grain_floor(%1$s, $1) END';
BEGIN
    IF p_key IS NULL AND p_step = 0 AND v_s.builtin THEN
        -- the built-in stream's totals over the range from its four grains, in one statement
        -- whose plan is kept (slidewin.rollup_range): the range's seconds from the first whole
        -- one, as the rollups' sec >= p_from
        v_lo := date_trunc('second', p_from, 'UTC');
        v_hi := date_trunc('second', p_to, 'UTC');
        RETURN QUERY
        SELECT NULL::timestamptz, w.n, w.n, coalesce(w.total, 0), w.vmin::numeric,
               w.vmax::numeric, NULL::float8, NULL::float8, 0::bigint, 0::bigint, 0::bigint
          FROM slidewin.rollup_range(v_lo + CASE WHEN v_lo < p_from THEN interval '1 s' ELSE
                                                 interval '0' END,
                                     v_hi + CASE WHEN v_hi < p_to THEN interval '1 s' ELSE
                                                 interval '0' END) AS w
         WHERE w.n > 0;
        RETURN;
    ELSIF p_key IS NULL AND p_step = 0 THEN
        -- rows to be summed whole: the range's whole minutes from the minute grain, the seconds
        -- before and after them from the second grain (at most 118 of those)
        v_lo := date_trunc('minute', p_from, 'UTC');
        v_lo := v_lo + CASE WHEN v_lo < p_from THEN interval '1 minute' ELSE interval '0' END;
        v_hi := greatest(date_trunc('minute', p_to, 'UTC'), v_lo);
        RETURN QUERY EXECUTE format(
            'SELECT %1$s FROM %2$s AS r UNION ALL SELECT %1$s FROM %3$s AS r '
            'UNION ALL SELECT %1$s FROM %4$s AS r',
            slidewin.stream_bucket_columns(p_stream, p_measure, NULL),
            slidewin.stream_rollups(p_stream, 1, 'r.sec >= $1 AND r.sec < least($2, $3)'),
            slidewin.stream_rollups(p_stream, 60, 'r.sec >= $2 AND r.sec < $4'),
            slidewin.stream_rollups(p_stream, 1, 'r.sec >= greatest($4, $1) AND r.sec < $3'))
        USING p_from, v_lo, p_to, v_hi;
        RETURN;
    END IF;
    IF p_key IS NULL THEN
        SELECT max(g) INTO v_g FROM unnest(slidewin.stream_grains(p_stream)) AS g
         WHERE p_step % g = 0 AND slidewin.grain_floor(p_from, g) = p_from
           AND slidewin.grain_floor(p_to, g) = p_to;
        v_g := coalesce(v_g, 1);
        RETURN QUERY EXECUTE format(
            'SELECT %s FROM %s AS r %s',
            slidewin.stream_bucket_columns(p_stream, p_measure,
                                           CASE WHEN v_g = p_step THEN NULL ELSE p_step END),
            slidewin.stream_rollups(p_stream, v_g, 'r.sec >= $2 AND r.sec < $3'),
            CASE WHEN v_g = p_step THEN '' ELSE 'GROUP BY 1' END)
        USING p_step, p_from, p_to;
        RETURN;
    END IF;
    IF v_m.type = 'double precision' THEN
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
        'FROM %4$s WHERE %7$s%5$I = $4::%6$s AND %1$I >= $2 AND %1$I < $3 '
        'GROUP BY 1',
        v_s.time_column, v_m.measure, v_aggs, slidewin.stream_table(p_stream), v_s.key_column,
        (SELECT c->>'type' FROM jsonb_array_elements(v_s.columns) c
          WHERE c->>'name' = v_s.key_column),
        -- the built-in table's partitions are by key: the one holding it
        CASE WHEN v_s.builtin THEN 'part = slidewin.partition_of($4::text) AND ' ELSE '' END)
    USING p_step, p_from, p_to, p_key;
END
$$;
