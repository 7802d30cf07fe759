"""slidewin's database layer: connections, the schema, and typed calls to the procedures."""
