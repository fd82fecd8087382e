"""Whether an epoch's sample order fits in this host's memory, asked before it is computed.

The order takes memory in proportion to the samples the indexes claim, and it is computed before any
shard is read: a 300-byte index can claim 10**9 samples. Under Linux's overcommit, allocating that
does not fail with ``MemoryError``; the kernel's out-of-memory killer ends the process (or another)
instead. So the order's size is compared with the memory available first, and a claim that does not
fit is refused with the shard that claims the most.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

from mds_core.errors import EpochMemoryError

# Peak bytes per sample of an epoch's order: generate_work peaks at 32 (py1e shuffle, measured with
# tracemalloc; 16 unshuffled) and the work array it returns is kept (8); the planner's per-node reads
# take about as much again. Rounded up: the check is a guard against the OOM killer, not a budget.
ORDER_BYTES_PER_SAMPLE = 48
_CGROUP = "/sys/fs/cgroup"


def check_order_fits(samples: int, epoch: int, largest: Callable[[], str]) -> None:
    """Refuse (``EpochMemoryError``) an order of ``samples`` that would not fit in the memory available.

    ``largest()`` names the index entry that claims the most samples, for the message: called only
    then, since finding it reads every entry.
    """
    needed, available = samples * ORDER_BYTES_PER_SAMPLE, available_memory()
    if available is not None and needed > available:
        raise EpochMemoryError(
            f"epoch {epoch}: the order of its {samples:,} samples needs about {needed / 2**30:.1f} GiB, more than "
            f"the {available / 2**30:.1f} GiB of memory available; {largest()}. If the data is not that large, "
            "that index is damaged or hostile: `mds verify` checks it against the shard files"
        )


def available_memory() -> int | None:
    """Bytes this process can still allocate.

    The host's ``MemAvailable``, or less under a cgroup limit or an address-space limit (``RLIMIT_AS``).
    """
    found = [amount for amount in (_meminfo_available(), _cgroup_room(), _address_space_room()) if amount is not None]
    return min(found) if found else None


def _address_space_room() -> int | None:
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/statm") as file:
            mapped = int(file.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        return max(0, soft - mapped)
    except (ImportError, OSError, ValueError):
        return None


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", "rb") as file:
            for line in file:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    if hasattr(os, "sysconf") and "SC_AVPHYS_PAGES" in os.sysconf_names:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return None


def _cgroup_room() -> int | None:
    """The limit less the usage of this process's memory cgroup, where one is set (v2, else v1)."""
    v2 = _cgroup_path("0::", "")
    v1 = _cgroup_path(":memory:", "memory")
    for folder, limit, usage in (
        (v2, "memory.max", "memory.current"),
        (v1, "memory.limit_in_bytes", "memory.usage_in_bytes"),
    ):
        try:
            with open(os.path.join(folder or "", limit)) as cap, open(os.path.join(folder or "", usage)) as used:
                text = cap.read().strip()
                if folder is not None and text != "max" and int(text) < _NO_LIMIT:
                    return max(0, int(text) - int(used.read()))
        except (OSError, ValueError):
            continue
    return None


_NO_LIMIT = 1 << 60  # cgroup v1 writes "no limit" as a number near 2**63


def _cgroup_path(marker: str, hierarchy: str) -> str | None:
    """The folder of this process's cgroup in the ``marker`` line of /proc/self/cgroup, or None."""
    try:
        with open("/proc/self/cgroup") as file:
            line = next((line for line in file if marker in line), None)
    except OSError:
        return None
    if line is None:
        return None
    relative = line.strip().split(marker, 1)[1].lstrip("/")
    for candidate in (os.path.join(_CGROUP, hierarchy, relative), os.path.join(_CGROUP, hierarchy)):
        if os.path.isdir(candidate):  # in a container the cgroup's own folder is the mount's root
            return candidate
    return None


def return_freed_memory() -> None:
    """Give the heap pages that were freed back to the kernel (glibc's ``malloc_trim``): no-op without glibc.

    glibc raises its mmap threshold (up to 32 MiB) each time a large block is freed, so later chunk-sized
    temporaries come from the heap and stay in the process once freed: the process that computed the order of
    10**8 samples kept 18 MiB of them for the rest of the run.
    """
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own symbols: glibc's, on Linux
    except (OSError, AttributeError):
        return
    trim(0)
