"""``create_exclusive`` where the file system refuses hard links (Databricks' /Volumes FUSE mount and others).

``os.link`` is made to fail with ``EPERM``, as such mounts answer, in real concurrent processes and
threads; the ``O_CREAT | O_EXCL`` fallback must still let exactly one writer win.
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from mds_core.storage.files import create_exclusive

WRITERS = 12


def race_threads(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run each call in a thread of its own, all released together: their results, in order."""
    start, results = threading.Barrier(len(calls)), [None] * len(calls)

    def run(n: int) -> None:
        start.wait()
        results[n] = calls[n]()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def one_winner(create: Callable[[str, bytes], bool], name: str) -> int:
    """Race WRITERS creates of ``name``, writer ``n`` writing ``writer n``: exactly one wins, and its bytes stay."""
    won = race_threads([partial(create, name, f"writer {n}".encode()) for n in range(WRITERS)])
    assert won.count(True) == 1 and won.count(False) == WRITERS - 1, won
    return won.index(True)


def _refuse_links(*args: object, **kwargs: object) -> None:
    raise PermissionError(errno.EPERM, "Operation not permitted")


def _racer(path: str, n: int, start, results) -> None:
    os.link = _refuse_links  # this process's file system has no hard links
    start.wait()
    results.put((n, create_exclusive(path, f"writer {n} ".encode() * 1000)))


@pytest.mark.parametrize("code", [errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV])
def test_a_refused_link_falls_back_to_an_exclusive_open(tmp_path: Path, monkeypatch, code: int) -> None:
    def refuse(*args: object) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "link", refuse)
    path = tmp_path / "manifest.json"
    assert create_exclusive(str(path), b"first") and not create_exclusive(str(path), b"second")
    assert path.read_bytes() == b"first" and os.listdir(tmp_path) == ["manifest.json"]


def test_other_link_errors_are_raised(tmp_path: Path, monkeypatch) -> None:
    def fail(*args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "link", fail)
    with pytest.raises(OSError, match="No space left"):
        create_exclusive(str(tmp_path / "manifest.json"), b"x")
    assert os.listdir(tmp_path) == []


def test_without_links_concurrent_processes_have_exactly_one_winner(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    for name in ("a.json", "b.json", "c.json"):
        path = str(tmp_path / name)
        start, results = context.Barrier(WRITERS), context.Queue()
        processes = [context.Process(target=_racer, args=(path, n, start, results)) for n in range(WRITERS)]
        for process in processes:
            process.start()
        outcomes = dict(results.get(timeout=60) for _ in processes)
        for process in processes:
            process.join(timeout=60)
            assert process.exitcode == 0
        winners = [n for n, won in outcomes.items() if won]
        assert len(winners) == 1 and Path(path).read_bytes() == f"writer {winners[0]} ".encode() * 1000
    assert sorted(os.listdir(tmp_path)) == ["a.json", "b.json", "c.json"]  # no temporary file left


def test_without_links_concurrent_threads_have_exactly_one_winner(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(os, "link", _refuse_links)
    for name in ("a.json", "b.json"):
        path = str(tmp_path / name)
        winner = one_winner(create_exclusive, path)
        assert Path(path).read_bytes() == f"writer {winner}".encode()


def test_a_failed_write_removes_the_file_so_the_create_can_be_retried(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(os, "link", _refuse_links)
    real_fsync = os.fsync
    calls: list[int] = []

    def failing_fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 2:  # the temporary file's sync passes; the final file's fails
            raise OSError(errno.EIO, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    path = tmp_path / "manifest.json"
    with pytest.raises(OSError, match="Input/output error"):
        create_exclusive(str(path), b"mine")
    assert os.listdir(tmp_path) == []
    assert create_exclusive(str(path), b"mine") and path.read_bytes() == b"mine"
