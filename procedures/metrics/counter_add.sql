-- slidewin.counter_add(name, labels, n): add n to a counter, in the caller's transaction.
CREATE OR REPLACE FUNCTION slidewin.counter_add(p_name text, p_labels jsonb, p_n bigint)
RETURNS void
LANGUAGE sql
AS $$
    INSERT INTO slidewin.counters AS c (name, labels, value)
    SELECT p_name, p_labels, p_n WHERE p_n > 0
    ON CONFLICT (name, labels) DO UPDATE SET value = c.value + excluded.value;
$$;
