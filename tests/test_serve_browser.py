"""The dashboard in a real headless Chromium (Debian's ``chromium``, driven by Playwright through
``executable_path``: Playwright's own browser download cannot work offline), against the real
``slidewin serve`` and a store being written (``tests.serve_fixtures.LiveWriter``: the ingest's
own sink, without Spark, whose start takes longer than this test):

- the page asks nothing of any host but the server (it works with no internet);
- the charts draw (their canvases hold the series' colours) and update as commits land;
- the dead-letter table pages back and returns to the live page;
- every stream is selectable, and a declared stream's measure too; the address keeps the view;
- a stream without a measure shows its counts, without the measure's cards; a view the server
  refuses leaves nothing of the previous one on screen; one point on a time axis spans a minute,
  not years;
- the key filter shows one key's windows (two keys, two sets of values), offers the stream's
  keys, goes into the address and survives a reload; a key with no events is empty charts and a
  note; the join results panel shows a result as it is written, and the join chosen;
- a lost connection recovers: cut under the page, it resumes where it was (Last-Event-ID, no new
  snapshot); with the server restarted, it starts again from a snapshot of the new one.

``SLIDEWIN_SCREENSHOT=1`` saves the page as docs/dashboard.png (the README's picture).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from slidewin.db import joins, streams
from slidewin.db.streams import Column
from tests.serve_fixtures import LiveWriter, ServedStore, screenshot_path, setup_store

CHROMIUM = (os.environ.get("SLIDEWIN_CHROMIUM") or shutil.which("chromium")
            or shutil.which("chromium-browser"))
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium on this machine: install Debian's chromium package (.ci/run does when it "
           "can) or point SLIDEWIN_CHROMIUM at one")
pytestmark = [pytestmark, pytest.mark.slow]
WAIT_MS = 30_000
STREAMS = ["events", "meters", "orders", "payments", "plain", "sensors"]


class Proxy:
    """A TCP relay in front of the server whose connections the test can cut at once."""

    def __init__(self, port: int) -> None:
        self.target = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            with self.lock:
                self.open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with self.lock:
                    self.open.discard(s)
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def cut(self) -> int:
        """Close every relayed connection, as a dropped network would; how many."""
        with self.lock:
            found = list(self.open)
        for s in found:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return len(found)

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        self.cut()


@pytest.fixture(scope="module")
def store(make_store) -> Iterator[tuple[str, LiveWriter]]:
    dsn = make_store(4)
    with psycopg.connect(dsn, autocommit=True) as conn:
        setup_store(conn)
        conn.execute("INSERT INTO slidewin.dead_letters (source, reason, detail, raw, stream) "
                     "SELECT 'old.jsonl', 'malformed', 'not JSON', '{\"uuid\": ' || i, 'events' "
                     "FROM generate_series(1, 25) i")
        streams.define(conn, "plain", key="id", time="ts", columns=[Column("id", "text")])
        conn.execute("INSERT INTO slidewin_streams.plain (id, ts) SELECT 'p' || i, "
                     "now() - i * interval '1 second' FROM generate_series(1, 3) i")
        # two meters whose readings differ: what one key's charts show is that key's alone
        streams.define(conn, "meters", key="meter", time="ts",
                       columns=[Column("meter", "text"), Column("kwh", "double precision")],
                       measures=["kwh"])
        conn.execute("INSERT INTO slidewin_streams.meters (meter, ts, kwh) "
                     "SELECT m, now() - i * interval '1 second', v FROM generate_series(1, 60) i, "
                     "(VALUES ('m-low', 1.0), ('m-high', 1000.0)) AS r(m, v)")
        for name in ("orders", "payments"):
            streams.define(conn, name, key="id", time="ts",
                           columns=[Column("id", "text"), Column("k", "text")])
        for name, within in (("paid", 5), ("paid_wide", 3600)):
            joins.define(conn, name, left="orders", right="payments", on="k",
                         before=timedelta(seconds=within), after=timedelta(seconds=within))
    with LiveWriter(dsn, every_s=0.2) as writer:
        writer.wait_batches(5)
        yield dsn, writer
    assert not writer.errors, writer.errors


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM,
                                     args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def served(store) -> Iterator[ServedStore]:
    with ServedStore(store[0], "--update-every", "300ms") as server:
        yield server


def open_page(browser: Any, url: str) -> tuple[Any, list[str], list[str]]:
    """A page on the dashboard; what it asked of other hosts, and its errors."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    elsewhere: list[str] = []
    errors: list[str] = []
    here = urlsplit(url).netloc

    def route(r: Any) -> None:
        if urlsplit(r.request.url).netloc == here:
            r.continue_()
        else:
            elsewhere.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(url)
    page.wait_for_function("window.slidewin && window.slidewin.live.snapshots >= 1",
                           timeout=WAIT_MS)
    return page, elsewhere, errors


CHART_DATA = "(name) => window.slidewin.charts[name].data[0].length"
COLOURED = """(name) => {
  const ctx = window.slidewin.charts[name].ctx, c = ctx.canvas;
  const d = ctx.getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    const [r, g, b, a] = [d[i], d[i + 1], d[i + 2], d[i + 3]];
    if (a > 100 && (Math.abs(r - g) > 60 || Math.abs(g - b) > 60)) n++;
  }
  return n;
}"""


def test_the_charts_draw_and_update_with_no_other_host(browser, served, store):
    page, elsewhere, errors = open_page(browser, served.url)
    try:
        for name in ("ingest", "freshness", "live", "window"):  # lines in the series' colours
            page.wait_for_function(f"({CHART_DATA})('{name}') > 1 && ({COLOURED})('{name}') > 50",
                                   timeout=WAIT_MS)
        live = "window.slidewin.live"
        before = page.evaluate(f"[{live}.updates, Math.max(...window.slidewin.charts.live"
                               ".data[0])]")
        page.wait_for_function(
            f"{live}.updates >= {before[0] + 3} && "
            f"Math.max(...window.slidewin.charts.live.data[0]) > {before[1]}", timeout=WAIT_MS)
        assert page.locator("#conn").inner_text() == "live"
        assert page.locator("#health").inner_text() == "healthy"
        assert "events held" in page.locator("#gauges").inner_text()
        assert page.locator("#partitions tbody tr").count() == 4
        assert page.locator("#sessions-card").is_visible()
        if os.environ.get("SLIDEWIN_SCREENSHOT"):
            page.wait_for_timeout(4000)  # a few more seconds of history on the charts
            page.screenshot(path=str(screenshot_path()), full_page=True)
        assert elsewhere == [] and errors == [], (elsewhere, errors)
    finally:
        page.close()


def _ids(page: Any) -> list[int]:
    return [int(t) for t in page.locator("#dead-letters tbody tr td:first-child").all_inner_texts()]


def test_the_dead_letter_table_pages(browser, served):
    page, _elsewhere, errors = open_page(browser, served.url)
    try:
        page.wait_for_function("document.querySelectorAll('#dead-letters tbody tr').length == 10",
                               timeout=WAIT_MS)
        first = _ids(page)
        assert first == sorted(first, reverse=True)
        # The live page moves on as the writer's dead letters arrive, so the page asked for is
        # the one before the oldest row shown at the click, read back from the page's label.
        page.click("#dl-older")
        page.wait_for_function("document.querySelector('#dl-page').textContent"
                               ".startsWith('before #')", timeout=WAIT_MS)
        before = int(page.locator("#dl-page").inner_text().removeprefix("before #"))
        assert before >= min(first)  # never a page newer than the one shown, nothing skipped
        second = _ids(page)
        assert len(second) == 10 and second == sorted(second, reverse=True)
        assert max(second) < before
        page.wait_for_timeout(1500)  # live updates keep coming; the page shown stays
        assert _ids(page) == second
        page.click("#dl-older")
        page.wait_for_function(f"document.querySelector('#dead-letters tbody td').textContent"
                               f" < {min(second)}", timeout=WAIT_MS)
        page.click("#dl-newest")
        page.wait_for_function("document.querySelector('#dl-page').textContent == 'live'",
                               timeout=WAIT_MS)
        assert _ids(page)[0] >= first[0]
        assert errors == []
    finally:
        page.close()


def test_every_stream_and_measure_is_selectable(browser, served):
    page, _elsewhere, errors = open_page(browser, served.url)
    try:
        page.wait_for_function(f"document.querySelectorAll('#stream option').length == "
                               f"{len(STREAMS)}", timeout=WAIT_MS)
        assert page.locator("#stream option").all_inner_texts() == STREAMS
        page.select_option("#stream", "sensors")
        page.wait_for_function("window.slidewin.state.view && "
                               "window.slidewin.state.view.stream == 'sensors' && "
                               "window.slidewin.state.view.measure == 'temp'", timeout=WAIT_MS)
        assert page.locator("#measure-label").is_visible()
        page.wait_for_function(f"({CHART_DATA})('live') > 0", timeout=WAIT_MS)
        temps = page.evaluate("window.slidewin.charts.live.data[2].filter(v => v !== null)")
        assert temps and all(20 <= t <= 25 for t in temps)  # the writer's temperatures
        page.select_option("#measure", "hum")
        page.wait_for_function("window.slidewin.state.view && "
                               "window.slidewin.state.view.measure == 'hum'", timeout=WAIT_MS)
        page.select_option("#kind", "hopping")
        page.wait_for_function("window.slidewin.state.view && "
                               "window.slidewin.state.view.kind == 'hopping'", timeout=WAIT_MS)
        assert page.locator("#advance-label").is_visible()
        page.wait_for_function(f"({CHART_DATA})('window') > 0", timeout=WAIT_MS)
        assert errors == []
        again, _elsewhere, errors = open_page(browser, page.url)  # the address keeps the view
        try:
            view = again.evaluate("window.slidewin.state.view")
            assert (view["stream"], view["measure"], view["kind"]) == ("sensors", "hum", "hopping")
            assert errors == []
        finally:
            again.close()
    finally:
        page.close()


BOARD = """() => ({
  live: window.slidewin.charts.live.data[0].length,
  window: window.slidewin.charts.window.data[0].length,
  gauges: document.querySelector('#gauges').innerText,
  rows: document.querySelectorAll('#partitions tbody tr').length,
})"""


def test_a_refused_view_leaves_nothing_of_the_previous_one(browser, served):
    page, _elsewhere, _errors = open_page(browser, served.url + "?stream=sensors")
    try:
        page.wait_for_function(f"({CHART_DATA})('live') > 0 && ({CHART_DATA})('window') > 0",
                               timeout=WAIT_MS)
        assert page.evaluate(BOARD)["rows"] == 1
        page.fill("#size", "ten seconds")
        page.press("#size", "Enter")
        page.wait_for_function("!document.querySelector('#problem').hidden", timeout=WAIT_MS)
        assert "is not a duration" in page.locator("#problem").inner_text()
        board = page.evaluate(BOARD)
        assert (board["live"], board["window"], board["rows"]) == (0, 0, 0), board
        assert board["gauges"].count("–") == 5, board  # every figure but "no history" blank
        assert page.locator("#stream option").all_inner_texts() == STREAMS
    finally:
        page.close()


def test_a_page_opened_on_a_refused_view_still_lists_every_stream(browser, served):
    page = browser.new_page()
    try:
        page.goto(served.url + "?stream=sensors&size=ten")
        page.wait_for_function(f"document.querySelectorAll('#stream option').length == "
                               f"{len(STREAMS)}", timeout=WAIT_MS)
        assert page.locator("#stream option").all_inner_texts() == STREAMS
        assert "is not a duration" in page.locator("#problem").inner_text()
        assert page.evaluate("window.slidewin.live.snapshots") == 0
    finally:
        page.close()


def test_a_stream_without_a_measure_shows_its_counts(browser, served):
    page, _elsewhere, errors = open_page(browser, served.url + "?stream=sensors")
    try:
        page.wait_for_function(f"({CHART_DATA})('live') > 0", timeout=WAIT_MS)
        assert page.locator("#live-card").is_visible()
        page.select_option("#stream", "plain")
        page.wait_for_function("window.slidewin.state.view && "
                               "window.slidewin.state.view.stream == 'plain'", timeout=WAIT_MS)
        assert page.locator("#conn").inner_text() == "live"
        assert not page.locator("#live-card").is_visible()
        assert not page.locator("#window-card").is_visible()
        assert not page.locator("#measure-label").is_visible()
        assert page.locator("#problem").is_hidden()
        board = page.evaluate(BOARD)
        assert (board["live"], board["window"], board["rows"]) == (0, 0, 1), board
        assert "3\nevents held" in board["gauges"], board
        assert errors == []
    finally:
        page.close()


# the values each measure chart draws: live (average, maximum), window (average, maximum)
DRAWN = """() => {
  const c = window.slidewin.charts, seen = (d) => d.filter((v) => v !== null && v !== undefined);
  const values = [c.live.data[1], c.live.data[2], c.window.data[1], c.window.data[2]];
  return [c.live.data[0].length, c.window.data[0].length, [...new Set(values.flatMap(seen))]];
}"""


def _key_shown(page: Any, key: str) -> list[float]:
    """Wait for the charts of ``key``; the values they draw."""
    page.wait_for_function(f"window.slidewin.state.view && window.slidewin.state.view.key == "
                           f"'{key}' && ({CHART_DATA})('live') > 0 && "
                           f"({CHART_DATA})('window') > 0", timeout=WAIT_MS)
    _live, _window, values = page.evaluate(DRAWN)
    return sorted(values)


def test_the_key_filter_shows_one_key_s_windows(browser, served):
    page, _elsewhere, errors = open_page(browser, served.url + "?stream=meters&key=m-low")
    try:
        assert page.locator("#key").input_value() == "m-low"
        assert _key_shown(page, "m-low") == [1]
        assert page.locator("#window-title").inner_text().endswith("of key m-low")
        page.wait_for_function("document.querySelectorAll('#keys option').length == 2",
                               timeout=WAIT_MS)  # the keys of the stream's newest events
        assert sorted(page.evaluate("Array.from(document.querySelectorAll('#keys option'), "
                                    "(o) => o.value)")) == ["m-high", "m-low"]
        page.fill("#key", "m-high")
        page.press("#key", "Enter")
        assert _key_shown(page, "m-high") == [1000]
        assert "key=m-high" in page.url and page.locator("#key-note").is_hidden()
        again, _elsewhere, errors_again = open_page(browser, page.url)  # a reload keeps the key
        try:
            assert again.locator("#key").input_value() == "m-high"
            assert _key_shown(again, "m-high") == [1000]
            assert errors_again == []
        finally:
            again.close()
        page.fill("#key", "m-none")  # no such key: empty charts, and a note saying why
        page.press("#key", "Enter")
        page.wait_for_function("window.slidewin.state.view && "
                               "window.slidewin.state.view.key == 'm-none'", timeout=WAIT_MS)
        assert "key 'm-none': no events of stream meters" in page.locator(
            "#key-note").inner_text()
        assert page.evaluate(DRAWN)[:2] == [0, 0]
        assert page.locator("#problem").is_hidden() and page.locator("#conn").inner_text() == "live"
        page.fill("#key", "")  # every key again: both meters' readings
        page.press("#key", "Enter")
        page.wait_for_function(f"window.slidewin.state.view && !window.slidewin.state.view.key "
                               f"&& ({CHART_DATA})('window') > 0", timeout=WAIT_MS)
        # both meters each second: the average between them, the high one the maximum
        assert set(page.evaluate(DRAWN)[2]) == {500.5, 1000} and "key=" not in page.url
        assert errors == []
    finally:
        page.close()


RESULT_IDS = """() => Array.from(document.querySelectorAll('#join-results tbody tr'),
  (tr) => tr.innerText)"""


def test_the_join_results_panel_shows_a_result_as_it_is_written(browser, served, store):
    dsn, _writer = store
    page, _elsewhere, errors = open_page(browser, served.url + "?stream=orders")
    try:
        page.wait_for_function("!document.querySelector('#join-results-card').hidden",
                               timeout=WAIT_MS)
        assert page.locator("#join").input_value() == "paid"
        assert page.evaluate(RESULT_IDS) == [
            "no results of paid in the hour up to its streams' newest record"]
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO slidewin_streams.orders (id, k, ts) "
                         "VALUES ('order-77', 'cart-9', now() - interval '2 seconds')")
            conn.execute("INSERT INTO slidewin_streams.payments (id, k, ts) "
                         "VALUES ('payment-31', 'cart-9', now() - interval '1 second')")
            written = conn.execute("SELECT l_id, r_id FROM slidewin_joins.paid").fetchall()
        assert written == [("order-77", "payment-31")]
        page.wait_for_function("document.querySelector('#join-results tbody').innerText"
                               ".includes('payment-31')", timeout=WAIT_MS)  # live, no reload
        [row] = page.evaluate(RESULT_IDS)
        assert "id=order-77" in row and "id=payment-31" in row and "k=cart-9" in row, row
        page.select_option("#join", "paid_wide")  # another join: its results, in the address
        page.wait_for_function("window.slidewin.state.view && "
                               "window.slidewin.state.view.join == 'paid_wide' && document"
                               ".querySelector('#join-results tbody').innerText"
                               ".includes('payment-31')", timeout=WAIT_MS)
        assert "join=paid_wide" in page.url
        assert errors == []
    finally:
        page.close()


ONE_POINT_SPAN = """async () => {
  const chart = window.slidewin.charts.freshness, t = Math.floor(Date.now() / 1000);
  const updates = window.slidewin.live.updates;
  chart.setData([[t], [1.5], [0.2], [null], [null]]);
  await new Promise((r) => setTimeout(r, 50));
  return [window.slidewin.live.updates === updates, chart.scales.x.max - chart.scales.x.min];
}"""


def test_one_point_on_a_time_axis_spans_a_minute_not_years(browser, served):
    page, _elsewhere, _errors = open_page(browser, served.url + "?stream=plain")
    try:
        for _ in range(10):  # a live update redrawing the chart meanwhile: ask again
            undisturbed, span = page.evaluate(ONE_POINT_SPAN)
            if undisturbed:
                break
        assert undisturbed and 10 <= span <= 120, span
    finally:
        page.close()


def test_a_lost_connection_recovers(browser, store, tmp_path: Path):
    dsn, _writer = store
    first = ServedStore(dsn, "--update-every", "300ms").start()
    proxy = Proxy(first.port_number)
    page = None
    try:
        page, _elsewhere, _errors = open_page(browser, f"http://127.0.0.1:{proxy.port}/")
        page.wait_for_function("window.slidewin.live.updates >= 2", timeout=WAIT_MS)
        # the network drops: the page reconnects by itself and resumes from its last event
        updates = page.evaluate("window.slidewin.live.updates")
        assert proxy.cut() >= 2  # the page's event stream among them
        page.wait_for_function("window.slidewin.live.errors >= 1", timeout=WAIT_MS)
        page.wait_for_function(f"window.slidewin.live.updates >= {updates + 3}", timeout=WAIT_MS)
        assert page.evaluate("window.slidewin.live.snapshots") == 1  # resumed, not restarted
        assert page.locator("#conn").inner_text() == "live"

        # the server goes away: the page says so, and comes back with the new one
        assert first.stop() == 130
        page.wait_for_function("document.querySelector('#conn').textContent != 'live'",
                               timeout=WAIT_MS)
        second = ServedStore(dsn, "--update-every", "300ms", port=first.port_number).start()
        try:
            page.wait_for_function("window.slidewin.live.snapshots >= 2 && "
                                   "document.querySelector('#conn').textContent == 'live'",
                                   timeout=WAIT_MS)
            updates = page.evaluate("window.slidewin.live.updates")
            page.wait_for_function(f"window.slidewin.live.updates >= {updates + 2}",
                                   timeout=WAIT_MS)
            assert page.evaluate(f"({CHART_DATA})('live')") > 0
        finally:
            second.stop()
            second.__exit__()
    finally:
        if page is not None:
            page.close()
        proxy.close()
        first.__exit__()
        time.sleep(0)  # the relay's threads end with their sockets
