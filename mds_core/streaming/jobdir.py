"""Node-local coordination through files in a per-job directory: no shared memory, no global names.

Every StreamingDataset job gets its own directory ``<root>/mds-<user>/<job token>``. The local
leader creates it and removes it at exit; directories left by crashed jobs (their creator is no
longer alive on this host) are swept when the next job starts. Inside it:

* ``<name>.lock`` files for ``fcntl.flock``: blocking waits, never polling sleeps;
* small JSON records written atomically (write a temporary file, then rename);
* shared arrays (``.npy``) computed once under a lock by whichever process needs them first and
  memory-mapped read-only by the others.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import socket
import tempfile
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from mds_core.errors import ConfigurationError
from mds_core.order.world import World
from mds_core.storage.files import atomic_file, atomic_write, file_lock, process_alive, require_file_locks
from mds_core.storage.folders import private_folder
from mds_core.streaming.memory import return_freed_memory

OWNER_FILE = "owner.json"
USERS = "users"  # one empty file per process using the job directory: <host>-<pid>


def default_root() -> str:
    """``$MDS_JOB_ROOT`` if set, else the system temp directory."""
    return os.environ.get("MDS_JOB_ROOT") or tempfile.gettempdir()


def user_dir(root: str) -> str:
    """Jobs of different users on one host never share or collide: each user has a folder of their own.

    Named by the uid's account (not ``$USER``, which a process may inherit from another user, under
    ``sudo`` say), or the uid itself. ``private_folder`` makes sure it is that user's alone.
    """
    try:
        user = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        user = str(os.getuid())
    return os.path.join(root, f"mds-{user}")


JOB_ROOT_FIX = "set MDS_JOB_ROOT (or job_root=) to a folder of your own"


TOKEN_BYTES = 8


def new_job_token() -> str:
    """A random token that names one training job's directory."""
    return secrets.token_hex(TOKEN_BYTES)


class JobDir:
    """One job's coordination directory on this node."""

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def create(cls, root: str, token: str) -> JobDir:
        """Create the directory (the local leader does this), sweeping crashed jobs' leftovers first."""
        parent = user_dir(root)
        require_file_locks(f"job directory {parent}")  # refused up front, not at the first lock mid-epoch
        try:
            private_folder(parent, JOB_ROOT_FIX)
        except OSError as err:
            raise ConfigurationError(f"cannot create the job directory root {parent}: {err}; {JOB_ROOT_FIX}") from err
        sweep_stale_jobs(parent)
        job = cls(os.path.join(parent, token))
        os.makedirs(os.path.join(job.path, USERS), exist_ok=True)
        # Join before the owner file appears: another job's sweep treats an owned directory without
        # live users as crashed, and would remove this one while it is still starting.
        job._join()
        job.write_json(OWNER_FILE, {"pid": os.getpid(), "host": socket.gethostname()})
        return job

    @classmethod
    def attach(cls, root: str, token: str) -> JobDir:
        """The directory another process on this node created for the same job."""
        job = cls(os.path.join(private_folder(user_dir(root), JOB_ROOT_FIX), token))
        require_file_locks(f"job directory {job.path}")
        if not os.path.isdir(job.path):
            raise ConfigurationError(f"job directory {job.path} does not exist; was it created by the local leader?")
        job._join()
        return job

    def _join(self) -> None:
        """Register this process as a user; the last user to leave removes the directory.

        Leaving runs when this process ends normally; sweep_stale_jobs covers crashes. The pid
        check in _leave matters: forked DataLoader workers inherit the finalizer and must not run it.
        """
        with open(os.path.join(self.path, USERS, _user_name(os.getpid())), "w"):
            pass
        self.cleanup = weakref.finalize(self, _leave, self.path, os.getpid())

    def __getstate__(self) -> dict[str, Any]:
        # Copies in DataLoader workers share the directory but never own its clean-up.
        return {"path": self.path}

    def file(self, name: str) -> str:
        """The path of ``name`` in the job directory."""
        return os.path.join(self.path, name)

    def lock(self, name: str) -> contextlib.AbstractContextManager[None]:
        """An exclusive lock over all processes on this node; waiting blocks in the kernel."""
        return file_lock(self.file(f"{name}.lock"))

    def read_json(self, name: str) -> Any | None:
        """The JSON file ``name`` in the job directory, or None if it is missing."""
        try:
            with open(self.file(name), "rb") as handle:
                return json.load(handle)
        except FileNotFoundError:
            return None

    def write_json(self, name: str, obj: Any) -> None:
        """Write ``obj`` to the JSON file ``name`` atomically."""
        atomic_write(self.file(name), [json.dumps(obj, sort_keys=True).encode("utf-8")], durable=False)

    def shared_array(self, name: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """``compute()`` run once per node; every caller gets the same array, memory-mapped read-only."""
        path = self.file(f"{name}.npy")
        for _ in range(3):
            if not os.path.exists(path):
                with self.lock(name):
                    if not os.path.exists(path):
                        array = np.ascontiguousarray(compute())
                        with atomic_file(path, durable=False) as handle:  # per job: recomputed if lost
                            np.save(handle, array)
                        del array
                        return_freed_memory()
            # A worker further ahead may remove the file between the check and the load (it cleans up
            # what it believes done with): compute it again. Once mapped, a removal no longer matters.
            with contextlib.suppress(FileNotFoundError):
                shared: np.ndarray = np.load(path, mmap_mode="r")  # a .npy file loads as one array (a memmap)
                return shared
        return np.ascontiguousarray(compute())  # removed again each time: this caller keeps its own copy

    def remove_files(self, prefix: str, keep: set[str]) -> None:
        """Delete ``prefix*`` files not named in ``keep`` (old epochs' work arrays)."""
        for entry in os.listdir(self.path):
            if entry.startswith(prefix) and entry not in keep:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.file(entry))


def sweep_stale_jobs(parent: str) -> None:
    """Remove job directories of this host none of whose users is alive (crashed runs)."""
    host = socket.gethostname()
    for entry in os.listdir(parent):
        path = os.path.join(parent, entry)
        owner = JobDir(path).read_json(OWNER_FILE) if os.path.isdir(path) else None
        if owner and owner.get("host") == host and not _live_users(path):
            shutil.rmtree(path, ignore_errors=True)


def _user_name(pid: int) -> str:
    return f"{socket.gethostname()}-{pid}"


def _live_users(path: str) -> list[str]:
    host = socket.gethostname()
    try:
        names = os.listdir(os.path.join(path, USERS))
    except FileNotFoundError:
        return []
    return [n for n in names if not n.startswith(f"{host}-") or process_alive(int(n.rsplit("-", 1)[1]))]


def _leave(path: str, pid: int) -> None:
    if os.getpid() != pid or not os.path.isdir(path):
        return
    with JobDir(path).lock("users"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(path, USERS, _user_name(pid)))
        if not _live_users(path):
            shutil.rmtree(path, ignore_errors=True)


def open_job(root: str, world: World, on_node_leader: Callable[[], None]) -> JobDir:
    """The job directory: created by each node's first rank, its name agreed over torch.distributed.

    ``on_node_leader`` runs on each node's first rank before the others go on (index downloads).
    """
    if world.num_ranks == 1:
        job = JobDir.create(root, new_job_token())
        on_node_leader()
        return job
    import torch.distributed as dist

    started_here = not dist.is_initialized()
    if started_here:
        if not os.environ.get("MASTER_ADDR") or not os.environ.get("MASTER_PORT"):
            raise ConfigurationError(
                "WORLD_SIZE > 1 but torch.distributed is not initialized and MASTER_ADDR/MASTER_PORT are not "
                "set: launch with torchrun or call torch.distributed.init_process_group first"
            )
        dist.init_process_group("gloo", rank=world.rank, world_size=world.num_ranks)
    carrier = None
    try:
        token, carrier = _rank_zeros_token(dist, world.rank)
        created = JobDir.create(root, token) if world.rank_of_node == 0 else None
        failure = None
        if created is not None:
            try:
                on_node_leader()
            except Exception as err:  # reach the barrier anyway, so the other ranks do not hang
                failure = err
        dist.barrier()
        if failure is not None:
            raise failure
        return created or JobDir.attach(root, token)
    finally:
        if started_here:
            dist.destroy_process_group()
        del carrier  # only now: see _rank_zeros_token


def _rank_zeros_token(dist: Any, rank: int) -> tuple[str, Any]:
    """Rank 0's new job token on every rank, and the tensor that carried it.

    The caller keeps the tensor until it has destroyed the process group it started. If gloo's worker thread
    dropped the last reference to a tensor, its destructor would wait for the GIL, which
    ``destroy_process_group`` holds while it joins that thread: under Composer's launcher (torch 2.7) rank 0
    hung there for good, and rank 1 with it (``broadcast_object_list`` made such tensors of its own).
    """
    import torch

    token = bytes.fromhex(new_job_token()) if rank == 0 else bytes(TOKEN_BYTES)
    carrier = torch.tensor(list(token), dtype=torch.uint8)
    dist.broadcast(carrier, src=0)
    return bytes(carrier.tolist()).hex(), carrier
