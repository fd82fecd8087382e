"""Regenerate the golden fixtures with the reference, and compare them with tests/fixtures.

Run from the repository root, in the reference's environment:

    benchmarks/.venv/bin/python -m tools.golden check [--out DIR] [--cases a,b] [--order-cases N] [--write]
    benchmarks/.venv/bin/python -m tools.golden generate --out DIR [--cases a,b] [--order-cases N]

``check`` exits 1 when a file differs. ``--write`` then replaces tests/fixtures/mds-golden and
order-golden with what was generated (the whole set only); nothing else ever writes into tests/fixtures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tools.golden.check import compare
from tools.golden.mds_cases import CASES, FIXTURES
from tools.golden.mds_gen import generate_mds
from tools.golden.order_gen import generate_order, quiet


@contextmanager
def private_tmpdir() -> Iterator[None]:
    """The reference leaves a lock file per dataset in the temp folder for good: use one of our own."""
    path = tempfile.mkdtemp(prefix="golden-tmp-")
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = tempfile.tempdir = path  # spawned processes read the variable
    try:
        yield
    finally:
        if saved[0] is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = saved[0]
        tempfile.tempdir = saved[1]
        shutil.rmtree(path, ignore_errors=True)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.golden", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["check", "generate"])
    parser.add_argument("--out", type=Path, help="an empty or new folder (check: default a fresh temp folder)")
    parser.add_argument("--cases", help="comma-separated mds-golden cases (default: all)")
    parser.add_argument("--order-cases", type=int, help="only the first N cases of each order-golden file")
    parser.add_argument("--write", action="store_true", help="check, then replace tests/fixtures with the result")
    args = parser.parse_args(argv)
    known = [case.name for case in CASES]
    args.names = args.cases.split(",") if args.cases else known
    if unknown := sorted(set(args.names) - set(known)):
        parser.error(f"unknown cases {unknown}; known: {known}")
    if args.command == "generate" and args.out is None:
        parser.error("generate needs --out")
    if args.write and (args.command != "check" or args.cases or args.order_cases is not None):
        parser.error("--write goes with a full check only")
    return args


def _prepare_out(out: Path | None) -> Path:
    if out is None:
        return Path(tempfile.mkdtemp(prefix="golden-"))
    out = out.resolve()
    if out.is_relative_to(FIXTURES.resolve()) or FIXTURES.resolve().is_relative_to(out):
        sys.exit(f"refusing to generate into {out}: use check --write to replace tests/fixtures")
    if out.exists() and any(out.iterdir()):
        sys.exit(f"{out} is not empty: stale files would be compared too")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _write_fixtures(out: Path) -> None:
    for name in ("mds-golden", "order-golden"):
        shutil.rmtree(FIXTURES / name)
        shutil.copytree(out / name, FIXTURES / name)
    print(f"replaced {FIXTURES}/mds-golden and order-golden with {out}")


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    out = _prepare_out(args.out)
    quiet()
    with private_tmpdir():
        generate_mds(out, args.names)
        generate_order(out, args.order_cases)
    print(f"generated into {out} (kept for inspection)")
    if args.command == "generate":
        return 0
    report = compare(out, FIXTURES, args.names, args.order_cases)
    print(report.text())
    if args.write:
        _write_fixtures(out)
        return 0
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
