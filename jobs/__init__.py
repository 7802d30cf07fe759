"""Scheduled retention: APScheduler jobs that nibble every partition ("run everywhere")."""
