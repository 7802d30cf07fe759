-- slidewin.session_define(p_name, p_gap, p_grace, p_retention): register a session window
-- definition; from the next insert on, every insert into slidewin.events keeps its sessions.
-- Validation (Kafka's KIP-428), each error naming the parameter, the value and the fix: a name of
-- 1-40 lowercase letters, digits and _, starting with a letter, not in use; gap > 0; grace >= 0;
-- retention >= gap + grace; each at most 100 years (slidewin.check_duration). Returns the
-- definition's id.
CREATE OR REPLACE FUNCTION slidewin.session_define(
    p_name text, p_gap interval, p_grace interval DEFAULT interval '0',
    p_retention interval DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
AS $$
DECLARE
    v_retention interval := coalesce(p_retention, greatest(p_gap + p_grace, interval '1 hour'));
    v_id integer;
BEGIN
    IF p_name IS NULL OR p_name !~ '^[a-z][a-z0-9_]{0,39}$' THEN
        RAISE EXCEPTION 'name % is not a session window name', coalesce(quote_literal(p_name), 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use 1-40 lowercase letters, digits and _, starting with a letter (clicks_30s)';
    END IF;
    IF p_gap IS NULL OR p_gap <= interval '0' THEN
        RAISE EXCEPTION 'gap % must be more than 0', coalesce(p_gap::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value', HINT = 'use a gap such as 30s';
    END IF;
    IF p_grace IS NULL OR p_grace < interval '0' THEN
        RAISE EXCEPTION 'grace % must be 0 or more', coalesce(p_grace::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value', HINT = 'use a grace such as 0s or 5s';
    END IF;
    -- at most 100 years each (slidewin.check_duration): a session's times stay timestamps
    PERFORM slidewin.check_duration('gap', p_gap, false);
    PERFORM slidewin.check_duration('grace', p_grace);
    PERFORM slidewin.check_duration('retention', p_retention, false);
    IF v_retention < p_gap + p_grace THEN
        RAISE EXCEPTION 'retention % is shorter than gap % plus grace %', v_retention, p_gap, p_grace
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = format('use a retention of at least %s (a session must stay until it can close)',
                                p_gap + p_grace);
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('slidewin.session_define'));
    IF EXISTS (SELECT 1 FROM slidewin.session_defs WHERE name = p_name AND dropped_at IS NULL) THEN
        RAISE EXCEPTION 'a session window named % exists already', p_name
            USING ERRCODE = 'duplicate_object',
                  HINT = format('choose another name, or remove it first (slidewin windows remove %s)', p_name);
    END IF;
    INSERT INTO slidewin.session_defs (name, gap, grace, retention)
    VALUES (p_name, p_gap, p_grace, v_retention)
    RETURNING id INTO v_id;
    RETURN v_id;
END
$$;
