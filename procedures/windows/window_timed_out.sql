-- slidewin.window_timed_out(p_what, p_message): the window functions' answer to a cancelled
-- statement. When p_message (a caught query_canceled's) says statement_timeout fired, raise it
-- again in words naming the function, the timeout and the fix; otherwise (a user's cancel) do
-- nothing, and the caller re-raises the cancel as it was. The function named is the one the
-- user called: a function over another (slidewin.hopping over slidewin.stream_hopping) sets
-- slidewin.window_name to its own name for the call. statement_timeout is the last guard for
-- SQL users: the work limit (slidewin.check_window_work) refuses too big a request before it
-- starts; a request under it that still runs too long (a slow server, a key with very many
-- events) stops here, with its own message.
CREATE OR REPLACE FUNCTION slidewin.window_timed_out(p_what text, p_message text)
RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF p_message LIKE '%statement timeout%' THEN
        RAISE EXCEPTION '% ran longer than statement_timeout (%) and was cancelled',
                        coalesce(nullif(current_setting('slidewin.window_name', true), ''),
                                 p_what),
                        current_setting('statement_timeout')
            USING ERRCODE = 'query_canceled',
                  HINT = 'ask for less: a shorter range, a larger advance or fewer rows; or '
                         'raise statement_timeout (SET statement_timeout = ''5min'')';
    END IF;
END
$$;
