"""The live view and the plain lines show the same content: reports and max-tracker lines."""

from __future__ import annotations

import io

from rich.console import Console

from slidewin.client.sim.live import LiveDisplay, PlainDisplay, make_display

REPORT = ["00:00:05 Report:", "  Average values over time windows:",
          "    Average for past  1s: no data"]


def test_plain_prints_every_line_in_order():
    out = io.StringIO()
    display = PlainDisplay(out)
    display.line("The initial maximum value for the dataset has been set to 7.")
    display.report(REPORT)
    display.close()
    assert out.getvalue().splitlines()[:4] == [
        "The initial maximum value for the dataset has been set to 7.", *REPORT]


def test_live_view_renders_the_latest_report_and_max_lines():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    display = LiveDisplay(console=console)
    display.line("The initial maximum value for the dataset has been set to 7.")
    display.report(REPORT)
    display.report([*REPORT[:2], "    Average for past  1s: 12.5 (3 rows)"])
    display.close()
    text = out.getvalue()
    assert "set to 7" in text and "12.5 (3 rows)" in text and "slidewin client" in text


def test_not_a_terminal_means_plain():
    assert isinstance(make_display(), PlainDisplay)  # pytest captures stdout: not a TTY
    assert isinstance(make_display(False), PlainDisplay)
