-- slidewin.grain_floor(p_ts, p_grain): the start of the p_grain-second bucket holding p_ts,
-- aligned to the epoch (1970-01-01 00:00 UTC) as Kafka Streams and Spark align windows.
-- date_bin() for times at or after the epoch; before it, arithmetic on the epoch seconds, since
-- some PostgreSQL releases (16.2 among them) give date_bin() one stride too early for a time
-- before its origin that is exactly on a boundary. Every part of it is immutable (the epoch
-- seconds are taken of an interval: extract() of a timestamptz is only stable), so PostgreSQL
-- inlines the call into the query that makes it: per row it costs a comparison and date_bin(),
-- where a call costs several times that, and date_trunc('second', ts, 'UTC') (the zone looked up
-- by name on every row) about three times.
CREATE OR REPLACE FUNCTION slidewin.grain_floor(p_ts timestamptz, p_grain integer)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN p_ts >= timestamptz '1970-01-01 00:00:00+00'
                THEN date_bin(make_interval(secs => p_grain), p_ts,
                              timestamptz '1970-01-01 00:00:00+00')
                ELSE to_timestamp((floor(extract(epoch FROM p_ts - timestamptz
                                                 '1970-01-01 00:00:00+00') / p_grain)
                                   * p_grain)::float8)
           END
$$;
