-- slidewin.config: the single row of store-wide settings.
-- partitions only grows (slidewin.ensure_partitions refuses to shrink): rows never lose their home.
-- At most 1000: slidewin.partition_name names them with three digits (db/limits.py too).
CREATE TABLE IF NOT EXISTS slidewin.config (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    partitions integer NOT NULL DEFAULT 8 CHECK (partitions BETWEEN 1 AND 1000)
);
INSERT INTO slidewin.config (id, partitions) VALUES (true, 8) ON CONFLICT (id) DO NOTHING;
