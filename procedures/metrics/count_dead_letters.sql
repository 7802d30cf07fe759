-- slidewin.count_dead_letters(): AFTER INSERT statement trigger on slidewin.dead_letters (the
-- ingest's COPY, the session windows' late events, a psql INSERT): adds the statement's rows
-- to the dead_letters counters by stream and reason, in the inserting transaction. One upsert
-- per reason per statement; the keys in sorted order, so two writers never wait for each other
-- in opposite orders. Notifies channel slidewin_dead_letters with each stream's name (at the
-- commit), so a live view need not wait for the stream's next good row.
CREATE OR REPLACE FUNCTION slidewin.count_dead_letters()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO slidewin.counters AS c (name, labels, value)
    SELECT 'dead_letters', l.labels, l.n
      FROM (SELECT jsonb_build_object('stream', n.stream, 'reason', n.reason)
                   AS labels, count(*) AS n
              FROM new_rows n GROUP BY 1) AS l
     ORDER BY l.labels
    ON CONFLICT (name, labels) DO UPDATE SET value = c.value + excluded.value;
    PERFORM pg_notify('slidewin_dead_letters', s.stream)
       FROM (SELECT DISTINCT n.stream FROM new_rows n) AS s;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER dead_letters_counted
    AFTER INSERT ON slidewin.dead_letters
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION slidewin.count_dead_letters();
