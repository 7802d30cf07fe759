-- slidewin.duration_text(interval): a duration as the CLI's options read it -- 0s, 1500ms, 90s,
-- 2m, 1h, 7d (the largest unit that divides it) -- so that a hint's fix can be typed as shown
-- (db.units.format_duration in Python). Months are taken as 30 days, as interval arithmetic does.
CREATE OR REPLACE FUNCTION slidewin.duration_text(p_d interval)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT CASE
        WHEN us IS NULL THEN NULL
        WHEN us = 0 THEN '0s'
        WHEN us % 86400000000 = 0 THEN (us / 86400000000)::text || 'd'
        WHEN us % 3600000000 = 0 THEN (us / 3600000000)::text || 'h'
        WHEN us % 60000000 = 0 THEN (us / 60000000)::text || 'm'
        WHEN us % 1000000 = 0 THEN (us / 1000000)::text || 's'
        WHEN us % 1000 = 0 THEN (us / 1000)::text || 'ms'
        ELSE rtrim(to_char(us / 1e6, 'FM999999999990.999999'), '0') || 's' END
      FROM (SELECT round(extract(epoch FROM p_d) * 1000000)::bigint AS us) AS d
$$;
