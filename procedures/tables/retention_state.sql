-- slidewin.retention_state: per partition, the newest event time retention has deleted so far.
-- slidewin.nibble raises it (never lowers it) in the transaction that deletes; nibbles delete
-- oldest first, so every event of that partition at or before retired_through is gone. Windows
-- read it to say which of their answers retention has already cut into (`partial`).
CREATE TABLE IF NOT EXISTS slidewin.retention_state (
    part            smallint PRIMARY KEY,
    retired_through timestamptz NOT NULL
);
