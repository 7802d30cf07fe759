"""Hostile parameters on every route of ``slidewin serve``'s API: each path and query parameter
the OpenAPI document lists gets a NUL byte, -10^20, 10^20, sixty nines and 10,000 characters in
turn (the other parameters valid), and the answer is never a 500 -- a refusal is the CLI's error
object with exit code 2 and a message of one short line. In-process, on ``tests.test_serve_api``'s
store.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from slidewin.client.serve.app import create_app
from tests import test_serve_api as api
from tests.test_serve_api import TestClient

dsn = api.dsn  # the same store, made afresh for this module
pinned = api.pinned


@pytest.fixture(scope="module")
def client(dsn: str) -> Iterator[TestClient]:
    with TestClient(create_app(dsn)) as c:
        yield c


HOSTILE = {"nul": "a\x00b", "minus_1e20": "-" + "1" + "0" * 20, "1e20": "1" + "0" * 20,
           "60_nines": "9" * 60, "10k_chars": "x" * 10_000}
# what makes each route's other parameters valid, so the hostile one is what is judged
PATH_VALUES = {"what": "avg", "kind": "tumbling", "name": "sensors"}
ROUTE_VALUES = {"/api/v1/sessions/{name}": {"name": "visits"},
                "/api/v1/joins/{name}": {"name": "paid"},
                "/api/v1/windows/rows": {"size": "10"},
                "/api/v1/windows/current": {"size": "10s"},
                "/api/v1/windows/{kind}": {"size": "10s"},
                # a live view every hostile value spoils (an accepted one would stream forever)
                "/api/v1/live": {"kind": "hopping", "size": "10s", "advance": "5s"}}
# any text may be a key or a join's name: a live view of one the store does not have is accepted
# (its board says so) and streams on, so the same view is judged where it is answered once
JUDGED_ONCE = {("/api/v1/live", "key"), ("/api/v1/live", "join")}


def _hostile_cases() -> list[tuple[str, str, str]]:
    doc = create_app("postgresql://127.0.0.1:1/unused").openapi()
    cases = []
    for path, item in sorted(doc["paths"].items()):
        names = [p["name"] for p in item["get"].get("parameters", []) if p["in"] != "header"]
        cases += [(path, name, label) for name in names for label in HOSTILE]
        if not names:
            cases += [(path, "unknown", label) for label in HOSTILE]
    return cases


def _hostile_url(path: str, name: str, value: str) -> str:
    from urllib.parse import quote, urlencode

    values = {**PATH_VALUES, **ROUTE_VALUES.get(path, {}), name: value}
    query = {k: v for k, v in values.items() if k == name or k in ROUTE_VALUES.get(path, {})}
    for key, text in values.items():
        if "{" + key + "}" in path:
            path = path.replace("{" + key + "}", quote(text, safe=""))
            query.pop(key, None)
    return f"{path}?{urlencode(query)}" if query else path


def _get_within(asker: TestClient, url: str, seconds: float = 20) -> Any:
    """``client.get(url)``, failing (not hanging) when the answer does not end: an accepted
    view on /api/v1/live streams until the app stops."""
    box: dict[str, Any] = {}

    def get() -> None:
        try:
            box["response"] = asker.get(url)
        except BaseException as exc:  # the test shows it
            box["error"] = exc

    asking = threading.Thread(target=get, daemon=True)
    asking.start()
    asking.join(seconds)
    assert not asking.is_alive(), f"{url[:200]} still answering after {seconds}s: accepted"
    if "error" in box:
        raise box["error"]
    return box["response"]


@pytest.mark.parametrize(("path", "name", "label"), _hostile_cases(),
                         ids=lambda v: v if len(v) < 40 else v[:40])
def test_a_hostile_parameter_is_refused_not_a_server_error(client, path, name, label):
    url = _hostile_url(path, name, HOSTILE[label])
    if (path, name) in JUDGED_ONCE and label not in ("nul", "10k_chars"):
        url = url.replace("/api/v1/live?", "/api/v1/dashboard?")
    response = _get_within(client, url)
    assert response.status_code < 500, (url[:200], response.text[:300])
    if response.status_code >= 400:
        body = response.json()
        assert body["exit_code"] == 2 and len(body["error"]) < 400, body


@pytest.mark.parametrize("path", [
    "/api/v1/windows/tumbling?size=1s&last=100000000d",
    "/api/v1/windows/tumbling?size=" + "9" * 60 + "s",
    "/api/v1/windows/rows?size=1&rows=100000000000",
    "/api/v1/windows/rows?size=100000000000",
    "/api/v1/windows/rows?size=10&advance=" + "9" * 60,
])
def test_a_number_too_large_for_the_store_is_400_not_500(client, path):
    response = client.get(path)
    assert response.status_code == 400 and response.json()["exit_code"] == 2, response.text
