"""A lock held by one thread is not held by a process forked meanwhile."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from mds_core.storage.files import file_lock


def _free_now(path: Path) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_a_child_forked_while_a_thread_holds_a_lock_does_not_keep_it(tmp_path: Path) -> None:
    path = tmp_path / "order.lock"
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with file_lock(str(path)):
            held.set()
            release.wait(timeout=30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(timeout=30)
    started, tell = os.pipe()
    ended, end = os.pipe()
    child = os.fork()
    if child == 0:  # the child lives on past the parent's release, as a DataLoader worker does
        os.write(tell, b"1")  # its fork handlers have run by now
        os.read(ended, 1)
        os._exit(0)
    assert os.read(started, 1) == b"1"
    try:
        assert not _free_now(path)  # the parent's thread holds it
        release.set()
        holder.join(timeout=30)
        assert _free_now(path)  # released, though the child still runs (it would hold it without the fix)
    finally:
        release.set()
        os.write(end, b"1")
        os.waitpid(child, 0)
        for fd in (started, tell, ended, end):
            os.close(fd)
