"""Errors of the jobs package. Messages are lowercase, name the bad value, and say the fix."""

from __future__ import annotations

from slidewin.db.errors import ConfigError, SlidewinError


class PolicyError(ConfigError):
    """A retention policy option is invalid (exit code 2); the message names the option."""


class JobError(ConfigError):
    """A job cannot be added, found or changed (unknown name, bad kind, bad interval)."""


class JobNotFound(JobError):
    """No job of that name is stored."""


class ConnectionModeError(SlidewinError):
    """A library call needs an autocommit connection (each nibble commits on its own)."""


__all__ = ["ConnectionModeError", "JobError", "JobNotFound", "PolicyError"]
