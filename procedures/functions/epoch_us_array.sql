-- slidewin.epoch_us_array(p_us): microseconds since 1970-01-01 UTC to timestamptz, element by
-- element, order kept. Writers hand over many times this way: integers cross the wire far
-- faster than formatted times (the ingest sink's session islands).
CREATE OR REPLACE FUNCTION slidewin.epoch_us_array(p_us bigint[])
RETURNS timestamptz[]
LANGUAGE sql IMMUTABLE
AS $$
    SELECT array_agg('epoch'::timestamptz + u.x * interval '1 microsecond' ORDER BY u.o)
      FROM unnest(p_us) WITH ORDINALITY AS u(x, o)
$$;
