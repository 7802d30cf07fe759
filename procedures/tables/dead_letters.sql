-- slidewin.dead_letters: every rejected input record, with its raw text and why (promise 6).
-- reason is a short machine word (malformed, missing_field, bad_type, out_of_range, bad_ts,
-- future, late, expired, ...); detail is the human sentence.
CREATE TABLE IF NOT EXISTS slidewin.dead_letters (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    received_at timestamptz NOT NULL DEFAULT now(),
    source      text NOT NULL,
    reason      text NOT NULL CHECK (reason ~ '^[a-z_]{1,40}$'),
    detail      text,
    raw         text NOT NULL,
    batch_id    bigint
);
CREATE INDEX IF NOT EXISTS dead_letters_received ON slidewin.dead_letters (received_at);
