"""How a command stopped by a signal ends: exit code 128 + the signal's number."""

from __future__ import annotations

import signal

INTERRUPTED_EXIT = 128 + signal.SIGINT  # 130, what shells report for Ctrl-C
