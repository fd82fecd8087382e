"""Two real users on one host: the test (root) forks a child that drops to an unprivileged uid.

A child cannot import anything new once it has dropped privileges (the interpreter lives under
``/root``, which other users cannot read), so a test does its imports, and a first read that loads
the lazily imported modules, before it forks. The child's environment says who it is (``HOME``,
``USER``) and where its temp folder is (``TMPDIR``, and ``tempfile``'s cached answer is reset), so
``tempfile.gettempdir()`` in the child is the shared, sticky folder the test made.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import stat
import tempfile
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest

MALLORY, ALICE = 2001, 2002  # uids without a passwd entry: mds_core names their folders by number


@contextlib.contextmanager
def shared_temp() -> Iterator[str]:
    """A sticky, world-writable folder, as /tmp is (the pytest folder is root's and 0700)."""
    if os.geteuid() != 0:
        pytest.fail("the two-user tests run as root, which can drop a forked child to another uid")
    path = tempfile.mkdtemp(prefix="mds-shared-tmp-", dir="/tmp")
    os.chmod(path, 0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def readable_by_all(path: str) -> str:
    """Let every user read ``path`` and everything under it (a dataset both users may stream); ``path``."""
    for parent, _, files in os.walk(path):
        os.chmod(parent, 0o755)
        for name in files:
            os.chmod(os.path.join(parent, name), 0o644)
    return path


def as_user(uid: int, tmp: str, work: Callable[[], Any], umask: int = 0o022) -> Any:
    """Run ``work()`` in a forked child as ``uid``, with ``tmp`` as its temp folder; its result or its error.

    An exception in the child comes back as ``("error", type name, message)``, so tests assert on it.
    """
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.umask(umask)
            os.environ.update(HOME=tmp, USER=str(uid), LOGNAME=str(uid), TMPDIR=tmp)
            os.environ.pop("MDS_JOB_ROOT", None)
            tempfile.tempdir = None
            try:
                result: Any = ("ok", work())
            except BaseException as err:
                result = ("error", type(err).__name__, str(err), traceback.format_exc())
            with os.fdopen(write, "wb") as pipe:
                pickle.dump(result, pipe)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and data, f"the child of uid {uid} died (status {status})"
    outcome = pickle.loads(data)
    return outcome[1] if outcome[0] == "ok" else outcome[:3] + (outcome[3],)


def tree(path: str) -> dict[str, tuple[int, str]]:
    """Every entry under ``path`` (itself excluded): its owner and mode, as ``ls -l`` would show them."""
    found = {}
    for parent, folders, files in os.walk(path):
        for name in folders + files:
            full = os.path.join(parent, name)
            info = os.lstat(full)
            found[os.path.relpath(full, path)] = (info.st_uid, stat.filemode(info.st_mode))
    return found
