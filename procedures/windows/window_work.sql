-- slidewin.window_work(p_size, p_advance, p_windows, p_grains): an upper bound on the work of a
-- series of p_windows windows of p_size every p_advance (whole seconds, or events for count
-- windows), computed from those numbers alone, before any row is read: the buckets read plus
-- the windows returned.
--
-- Buckets are read from the grains p_grains (the built-in stream's 1 s, 10 s, 1 min, 1 h; a
-- declared stream's 1 s, 1 min; one grain for a key's raw rows or count windows' events), each
-- window series cut at every window's start and end and at every multiple of the size
-- (slidewin.stream_pieces): with g = gcd(size, advance) and G the coarsest grain dividing g, a
-- series over a span S = (windows - 1) x advance + size reads at most S / G buckets, and at
-- most, per grain, the buckets of the grain above that a cut falls inside times how many of its
-- own fit in one (10 per 10 s, 6 per minute, 60 per hour), plus the span's buckets of the
-- coarsest grain. Tumbling windows (advance = size) read S / G buckets.
CREATE OR REPLACE FUNCTION slidewin.window_work(
    p_size bigint, p_advance bigint, p_windows bigint,
    p_grains integer[] DEFAULT ARRAY[1, 10, 60, 3600])
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v_g      bigint := gcd(p_size, p_advance);
    v_span   bigint := (p_windows - 1) * p_advance + p_size;
    v_used   integer[] := '{}'::integer[];
    v_fine   bigint;
    v_pieces bigint := 0;
    v_sets   bigint;
    v_grain  integer;
BEGIN
    IF p_windows <= 0 THEN
        RETURN 0;
    END IF;
    -- the grains a piece can be of: the coarsest dividing g (else the finest) and every coarser
    -- one; p_grains ascend
    FOREACH v_grain IN ARRAY p_grains LOOP
        IF v_g % v_grain = 0 THEN
            v_used := ARRAY[v_grain];
        ELSIF cardinality(v_used) > 0 THEN
            v_used := v_used || v_grain;
        END IF;
    END LOOP;
    IF cardinality(v_used) = 0 THEN
        v_used := p_grains;
    END IF;
    v_fine := (v_span + v_used[1] - 1) / v_used[1] + 1;
    IF p_advance = p_size OR cardinality(v_used) = 1 THEN
        RETURN v_fine + p_windows;
    END IF;
    FOR i IN 1 .. cardinality(v_used) - 1 LOOP
        -- buckets of the grain above that a start, an end or a block boundary falls inside,
        -- each read as its buckets of this grain
        v_sets := 2 * least(p_windows, (p_windows - 1) * p_advance / v_used[i + 1] + 2)
                  + v_span / p_size + 2;
        v_pieces := v_pieces + least(v_span / v_used[i + 1] + 2, v_sets)
                               * (v_used[i + 1] / v_used[i]);
    END LOOP;
    v_pieces := v_pieces + v_span / v_used[cardinality(v_used)] + 2;
    RETURN least(v_fine, v_pieces) + p_windows;
END
$$;
