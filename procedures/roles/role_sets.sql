-- slidewin.role_sets: the role sets `slidewin db roles` (slidewin.create_roles) made for this
-- database, by name prefix (`slidewin` -> slidewin_owner, slidewin_ingest, slidewin_jobs,
-- slidewin_reader). Roles belong to the whole server, grants to one database: this table is how
-- `slidewin db init`, slidewin.stream_define and slidewin.join_define know whose grants to
-- extend to the objects they create (slidewin.regrant_roles).
CREATE TABLE IF NOT EXISTS slidewin.role_sets (
    prefix     text        PRIMARY KEY CHECK (prefix ~ '^[a-z_][a-z0-9_]{0,40}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);
