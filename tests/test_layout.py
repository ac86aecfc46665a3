"""README's layout table matches the tree, and tests/ mirrors the package.

A maintainer new to the code reads the table first: every path it names
exists, every top-level entry of the checkout and every module of
``sgemm_cube/`` is named in it, and each test folder under
``tests/sgemm_cube/`` has its package folder.
"""
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _layout_rows() -> list[tuple[list[str], str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = line.split(" | ")
        if line.startswith("| `") and len(cells) >= 2:
            rows.append((re.findall(r"`([^`]+)`", cells[0]), line))
    return rows


def _resolve(names: list[str]) -> list[pathlib.Path]:
    """The first name is a path from the root; the others in the cell are beside it (same folder)."""
    first = ROOT / names[0]
    folder = first if names[0].endswith("/") else first.parent
    return [first] + [folder / n for n in names[1:] if not n.startswith("sgemm_cube.")]


def test_every_path_in_the_table_exists():
    rows = _layout_rows()
    assert len(rows) > 15
    missing = [str(p.relative_to(ROOT)) for names, _ in rows for p in _resolve(names) if not p.exists()]
    assert not missing, missing


def test_every_top_level_entry_and_package_module_is_in_the_table():
    named = {p.resolve() for names, _ in _layout_rows() for p in _resolve(names)}
    try:
        tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    top = {line.split("/")[0] + ("/" if "/" in line else "") for line in tracked.splitlines()}
    top -= {".gitignore", "README.md", "sgemm_cube/"}  # the package: its entries are checked one by one below
    unnamed = [t for t in sorted(top) if (ROOT / t).resolve() not in named]
    assert not unnamed, f"top-level entries missing from README's layout table: {unnamed}"
    package = [p for p in (ROOT / "sgemm_cube").iterdir() if p.name != "__pycache__"]
    unnamed = sorted(p.name for p in package if p.resolve() not in named)
    assert not unnamed, f"sgemm_cube/ entries missing from README's layout table: {unnamed}"


def test_tests_mirror_the_package():
    for folder in (ROOT / "tests" / "sgemm_cube").rglob("*"):
        if folder.is_dir() and folder.name != "__pycache__":
            package = ROOT / "sgemm_cube" / folder.relative_to(ROOT / "tests" / "sgemm_cube")
            assert package.is_dir(), f"{folder.relative_to(ROOT)} has no package folder {package.relative_to(ROOT)}"
            assert (folder / "__init__.py").is_file(), folder
