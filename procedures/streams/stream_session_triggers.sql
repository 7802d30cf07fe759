-- Every declared stream has the session trigger (slidewin.session_triggers): a store whose
-- streams were declared before streams could have session windows gets it from slidewin db init.
SELECT slidewin.session_triggers(name) FROM slidewin.streams WHERE NOT builtin;
