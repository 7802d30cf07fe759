"""Spark Structured Streaming ingest: landing directory -> exactly-once rows and rollups."""
