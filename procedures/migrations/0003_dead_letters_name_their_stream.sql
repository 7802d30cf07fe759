-- 0003: every dead letter names its stream. Versions 1 and 2 left `stream` NULL for the built-in
-- stream's (version 1 had no column at all), so each reader had to know that NULL meant
-- `events`. The old rows are named now, once, in the upgrade's one transaction: a failed init
-- leaves them as they were, and no reader ever meets a NULL. One pass over the table, at the
-- upgrade only; the column is then NOT NULL, so a writer that forgets the stream fails at once.
-- The index on (stream, id) lost its `stream IS NOT NULL` predicate: the baseline makes it again
-- over every row.
ALTER TABLE slidewin.dead_letters ADD COLUMN IF NOT EXISTS stream text;
UPDATE slidewin.dead_letters SET stream = 'events' WHERE stream IS NULL;
ALTER TABLE slidewin.dead_letters ALTER COLUMN stream SET NOT NULL;
DROP INDEX IF EXISTS slidewin.dead_letters_stream;
