-- slidewin.minute_history: per-minute, per-partition summary of the retained window, built from
-- the rollups (not the raw rows). Refresh with SELECT slidewin.refresh_minute_history().
CREATE MATERIALIZED VIEW IF NOT EXISTS slidewin.minute_history AS
SELECT date_trunc('minute', sec, 'UTC') AS minute,
       part,
       sum(n)::bigint AS n,
       sum(total) AS total,
       min(vmin) AS vmin,
       max(vmax) AS vmax
  FROM slidewin.rollups
 GROUP BY 1, 2
WITH NO DATA;
CREATE UNIQUE INDEX IF NOT EXISTS minute_history_pk ON slidewin.minute_history (minute, part);
