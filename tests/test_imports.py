"""Every import of the project's packages names them under ``slidewin.``: the source tree also
has them as top-level folders, and a module imported by its bare folder name as well as under
``slidewin.`` would load twice (two copies of its state), and not at all from a wheel."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BARE = re.compile(r"^\s*(?:from|import)\s+(?:client|db|ingest|jobs|procedures)(?:\.|\s|$)", re.M)


def test_no_module_imports_a_package_by_its_bare_folder_name() -> None:
    found = [f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}"
             for folder in ("client", "db", "ingest", "jobs", "procedures", "tests")
             for path in sorted((ROOT / folder).rglob("*.py"))
             for text in [path.read_text(encoding="utf-8")]
             for m in BARE.finditer(text)]
    assert found == [], found
