"""docs/architecture.md's layout map names every module of the five packages.

The map is the code block under "## Layout of the code": a line at column 0 opens a package
(``db/``), a line indented two spaces is an entry whose first column (up to the first run of two
or more spaces) names one or more modules or subpackages (``connect, config, embedded``,
``cli/``, ``processes.py``); the rest of the entry, with its deeper-indented continuation
lines, describes it. The rules:

- a top-level module (``db/streams.py``) or subpackage (``client/cli/``) is named in the first
  column of one of its package's entries;
- a module of a subpackage (``client/cli/bench_ingest.py``) is named anywhere in that
  subpackage's entry (``... bench + bench_* for its subcommands``: ``name_*`` covers a family);
- procedures' SQL is mapped by folder, not file by file: its 160-odd files are one object each,
  named after the object, so the folder (``streams/``) is what a reader needs to find one, and a
  file list would only repeat ``ls``. Every folder holding ``.sql`` files, and ``schema.sql`` at
  the top, is named in the procedures entry.

``__init__.py`` files are the package itself and need no line of their own.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("client", "db", "ingest", "jobs", "procedures")
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\*?/?")


def layout_block(root: Path) -> list[str]:
    text = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Layout of the code", 1)[1].split("\n## ", 1)[0]
    blocks = section.split("```")
    # the blocks are the odd pieces; the map is the one whose lines open the packages
    for block in blocks[1::2]:
        if any(line.startswith("db/") for line in block.splitlines()):
            return block.splitlines()
    raise AssertionError("docs/architecture.md: no layout map under '## Layout of the code'")


def package_sections(lines: list[str]) -> dict[str, list[str]]:
    """Package folder -> the lines from its column-0 line to the next one."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        if line and not line[0].isspace():
            current = sections.setdefault(line.split("/", 1)[0], [])
        if current is not None:
            current.append(line)
    return sections


def entries(section: list[str]) -> list[tuple[set[str], str]]:
    """(names in the first column, the whole entry's text) of each two-space-indented entry."""
    out: list[tuple[set[str], str]] = []
    for line in section[1:]:
        if re.match(r"  \S", line):
            first = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
            names = {w.removesuffix(".py") for w in WORD.findall(first.replace(".py", ""))}
            out.append((names, line))
        elif out:
            out[-1] = (out[-1][0], out[-1][1] + "\n" + line)
    return out


def named(name: str, words: set[str]) -> bool:
    return name in words or any(w.endswith("_*") and name.startswith(w[:-1]) for w in words)


def python_modules(root: Path, package: str) -> list[Path]:
    return sorted(p.relative_to(root) for p in (root / package).rglob("*.py")
                  if p.name != "__init__.py" and "__pycache__" not in p.parts)


def missing_from_map(root: Path = ROOT) -> list[str]:
    """The modules, subpackages and SQL folders the map leaves out, as paths under ``root``."""
    sections = package_sections(layout_block(root))
    missing: list[str] = []
    for package in PACKAGES:
        section = sections.get(package)
        if section is None:
            missing.append(f"{package}/")
            continue
        if package == "procedures":
            missing += missing_sql_folders(root, "\n".join(section))
            continue
        found = entries(section)
        for module in python_modules(root, package):
            parts = module.with_suffix("").parts[1:]
            if len(parts) == 1:
                ok = any(parts[0] in names for names, _ in found)
            else:
                sub = [text for names, text in found if f"{parts[0]}/" in names]
                ok = bool(sub) and named(parts[-1], set(WORD.findall("\n".join(sub))))
            if not ok:
                missing.append(str(module))
        missing += [f"{package}/{d.name}/" for d in sorted((root / package).iterdir())
                    if (d / "__init__.py").is_file()
                    and not any(f"{d.name}/" in names for names, _ in found)]
    return missing


def missing_sql_folders(root: Path, text: str) -> list[str]:
    words = set(WORD.findall(text))
    folders = sorted({p.parent.name for p in (root / "procedures").glob("*/*.sql")})
    missing = [f"procedures/{f}/" for f in folders if f"{f}/" not in words]
    if "schema.sql" not in text:
        missing.append("procedures/schema.sql")
    return missing


def test_every_module_of_the_five_packages_is_on_the_architecture_map() -> None:
    assert missing_from_map() == [], (
        "add these to the layout map in docs/architecture.md ('## Layout of the code')"
    )


@pytest.mark.parametrize(
    "path", ["db/made_up.py", "client/sim/made_up.py", "client/made_up/", "procedures/made_up/"]
)
def test_the_map_check_sees_what_the_map_does_not_name(tmp_path: Path, path: str) -> None:
    """A copy of the tree with one thing added that the map does not name: the check names it."""
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "architecture.md", tmp_path / "docs")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    assert missing_from_map(tmp_path) == missing_from_map()
    added = tmp_path / path
    if path.endswith("/"):
        added.mkdir()
        marker = "one.sql" if path.startswith("procedures") else "__init__.py"
        (added / marker).write_text("", encoding="utf-8")
    else:
        added.write_text("", encoding="utf-8")
    assert path in missing_from_map(tmp_path)
