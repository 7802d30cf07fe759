-- slidewin.dead_letters: every rejected input record, with its raw text and why (promise 6).
-- reason is a short machine word (malformed, missing_field, bad_type, out_of_range, bad_ts,
-- bad_encoding, future, late, expired, unreadable_file, ...); detail is the human sentence.
-- raw is the record as text (invalid UTF-8 shown as U+FFFD, NUL as \0); raw_bytes holds the
-- exact input bytes whenever raw is not them, so coalesce(raw_bytes, convert_to(raw, 'UTF8'))
-- gives back what the producer wrote.
CREATE TABLE IF NOT EXISTS slidewin.dead_letters (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    received_at timestamptz NOT NULL DEFAULT now(),
    source      text NOT NULL,
    reason      text NOT NULL CHECK (reason ~ '^[a-z_]{1,40}$'),
    detail      text,
    raw         text NOT NULL,
    batch_id    bigint,
    raw_bytes   bytea
);
-- stores made before raw_bytes existed gain it (idempotent, like every baseline file)
ALTER TABLE slidewin.dead_letters ADD COLUMN IF NOT EXISTS raw_bytes bytea;
CREATE INDEX IF NOT EXISTS dead_letters_received ON slidewin.dead_letters (received_at);
-- the event time, when the record's ts parsed (late, expired, future, ...): windows count the
-- late events of the range they answer for with the partial index below
ALTER TABLE slidewin.dead_letters ADD COLUMN IF NOT EXISTS event_ts timestamptz;
CREATE INDEX IF NOT EXISTS dead_letters_late_ts ON slidewin.dead_letters (event_ts)
    WHERE reason = 'late';
-- the stream the record was meant for, the built-in one's `events` too (migration 0003 named the
-- rows older versions left NULL): every reader filters by it alike; a stream's page of dead
-- letters is one index range
ALTER TABLE slidewin.dead_letters ADD COLUMN IF NOT EXISTS stream text NOT NULL;
CREATE INDEX IF NOT EXISTS dead_letters_stream ON slidewin.dead_letters (stream, id);
