-- slidewin.grain_floor(p_ts, p_grain): the start of the p_grain-second bucket holding p_ts,
-- aligned to the epoch (1970-01-01 00:00 UTC) as Kafka Streams and Spark align windows.
CREATE OR REPLACE FUNCTION slidewin.grain_floor(p_ts timestamptz, p_grain integer)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT date_bin(make_interval(secs => p_grain), p_ts, timestamptz '1970-01-01 00:00:00+00') $$;
