-- slidewin: the schema that holds every slidewin object.
CREATE SCHEMA IF NOT EXISTS slidewin;
