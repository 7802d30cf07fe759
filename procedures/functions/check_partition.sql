-- slidewin.check_partition(p_part): raise invalid_parameter_value unless p_part exists.
CREATE OR REPLACE FUNCTION slidewin.check_partition(p_part integer)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    v_partitions integer;
BEGIN
    SELECT partitions INTO v_partitions FROM slidewin.config;
    IF p_part IS NULL OR p_part < 0 OR p_part >= v_partitions THEN
        RAISE EXCEPTION 'p_part must be a partition number from 0 to %, got %', v_partitions - 1,
            coalesce(p_part::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'list partitions with: SELECT * FROM slidewin.partition_keys()';
    END IF;
END
$$;
