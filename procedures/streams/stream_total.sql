-- slidewin.stream_total(sum, nan, pinf, ninf): what sum() over the raw values gives, from a
-- rollup's exact sum of the finite values and its counts of NaN, +Infinity and -Infinity:
-- NaN when there is a NaN or both infinities, else the infinity there is, else the exact sum.
-- So deleting the only NaN makes the sum finite again.
CREATE OR REPLACE FUNCTION slidewin.stream_total(
    p_sum numeric, p_nan bigint, p_pinf bigint, p_ninf bigint)
RETURNS numeric
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE WHEN p_nan > 0 OR (p_pinf > 0 AND p_ninf > 0) THEN 'NaN'::numeric
                WHEN p_pinf > 0 THEN 'Infinity'::numeric
                WHEN p_ninf > 0 THEN '-Infinity'::numeric
                ELSE p_sum END
$$;
