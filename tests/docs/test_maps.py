"""The documentation's maps match the tree: every file the architecture page's "Where things are" table
names exists, and the home page's "Where to read on" lists every page of the site's navigation."""

from __future__ import annotations

import re
from pathlib import Path

from tests.docs.blocks import ROOT, page_text, section

_PATH = re.compile(r"[\w.][\w./-]*")  # `mds_core/order/epoch.py`, `work.py`, `./dagster.yaml`; not `--schedule`


def named_paths(table: str) -> list[Path]:
    """The files and folders the table's right-hand column names, relative to the checkout.

    A name with a ``/`` is a path from the top of the checkout (``./dagster.yaml`` is a file there); a
    bare name (``work.py``) is in the folder of the last path named before it in the same cell.
    """
    paths = []
    for row in table.splitlines():
        if not row.startswith("| ") or row.startswith("| I am looking for"):
            continue
        cell, folder = row.strip().strip("|").rsplit("|", 1)[1], None
        for name in re.findall(r"`([^`]+)`", cell):
            if not _PATH.fullmatch(name) or not re.search(r"\.\w+$|/$", name):
                continue  # code, options, placeholders such as `pipelines/defs/<dataset>/defs.yaml`
            if "/" in name:
                path = ROOT / name
                folder = path if name.endswith("/") else path.parent
            else:
                assert folder is not None, f"{name!r} comes before any folder in: {row}"
                path = folder / name
            paths.append(path)
    return paths


def test_every_file_the_architecture_map_names_exists() -> None:
    paths = named_paths(section(page_text("docs/architecture.md"), "## Where things are"))
    assert len(paths) > 100  # the table was read: it names well over a hundred files
    assert ROOT / "mds_core" / "order" / "work.py" in paths and ROOT / "testsupport" / "s3.py" in paths
    missing = [str(path.relative_to(ROOT)) for path in paths if not path.exists()]
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_bare_names_are_read_in_the_folder_named_before_them() -> None:
    table = "| batching | `mds_core/order/batching.py`, `plan.py`; `testsupport/` (`s3.py`) |\n"
    assert named_paths(table) == [
        ROOT / "mds_core" / "order" / "batching.py",
        ROOT / "mds_core" / "order" / "plan.py",  # gone: the test above would name it
        ROOT / "testsupport",
        ROOT / "testsupport" / "s3.py",
    ]


def test_the_home_page_points_to_every_page_of_the_site() -> None:
    nav = re.findall(r"^  - [^:]+: (\S+\.md)$", page_text("mkdocs.yml"), re.M)
    assert "architecture.md" in nav and "index.md" in nav
    listed = re.findall(
        r"^\| \[[^\]]+\]\(([\w-]+\.md)\) \|", section(page_text("docs/index.md"), "## Where to read on"), re.M
    )
    assert listed == [page for page in nav if page != "index.md"]  # each once, in the site's order
