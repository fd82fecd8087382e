"""Run a fuzz target over many inputs and classify what escapes.

The properties every target shares:

* only ``MDSError`` subclasses escape (any other exception is a failure, keyed by its type and
  the innermost frame, so a thousand inputs hitting one bug count as one distinct failure);
* no input takes longer than ``TIME_LIMIT_S``: a ``SIGALRM`` interrupts Python code, and
  ``faulthandler`` kills the process (a "hard hang") if C code does not return;
* each target adds its own checks by raising ``PropertyFailure`` (out-of-bounds reads, a verify
  that misses a corrupted byte, paths that disagree).

Input ``i`` of a target is generated from ``random.Random(f"{seed}:{target}:{i}")``, so any
failure is reproduced from its number alone and the campaign splits over processes freely.
"""

from __future__ import annotations

import base64
import faulthandler
import json
import os
import random
import resource
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mds_core.errors import MDSError

TIME_LIMIT_S = 2.0  # per input; the slowest legitimate input (a 150 KB shard, every sample 3 ways) takes ~20 ms
HARD_LIMIT_S = 30.0  # a hang in C code that SIGALRM cannot interrupt: the process is killed
MEMORY_LIMIT = 3 << 30  # address space per fuzzing process: a huge allocation fails (MemoryError) instead of swapping
REGRESSIONS = Path(__file__).parent / "regressions"


class PropertyFailure(Exception):
    """A target-specific property did not hold; ``kind`` names it for de-duplication."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


class InputTimeout(BaseException):
    """Raised by the alarm; a BaseException so ``except Exception`` in the code under test cannot swallow it."""


class Target(Protocol):
    name: str

    def setup(self, workdir: str) -> None: ...

    def generate(self, rng: random.Random) -> dict[str, Any]: ...

    def check(self, case: dict[str, Any]) -> None: ...


@dataclass
class Stats:
    target: str
    inputs: int = 0
    seconds: float = 0.0
    failures: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> first example

    def merge(self, other: Stats) -> None:
        self.inputs += other.inputs
        self.seconds = max(self.seconds, other.seconds)
        for key, example in other.failures.items():
            self.failures.setdefault(key, example)


def failure_key(err: BaseException) -> str:
    """One key per bug: the exception type and the innermost frame that raised it."""
    if isinstance(err, PropertyFailure):
        return f"property {err.kind}"
    if isinstance(err, InputTimeout):
        return "timeout"
    frames = traceback.extract_tb(err.__traceback__)
    ours = [f for f in frames if "mds_core" in f.filename] or frames
    where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "?"
    return f"{type(err).__name__} at {where}"


def run_one(target: Target, case: dict[str, Any], limit_s: float = TIME_LIMIT_S) -> BaseException | None:
    """Check one input; the failure (not an ``MDSError``), or None if every property held."""
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        target.check(case)
    except MDSError:
        return None
    except (Exception, InputTimeout) as err:  # anything else escaping is the bug we look for
        return err
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return None


def limit_memory(limit: int = MEMORY_LIMIT) -> None:
    """Cap this process's address space, so a decoder that believes a corrupt size cannot exhaust the machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft > limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _on_alarm(signum: int, frame: Any) -> None:
    raise InputTimeout(f"input ran past {TIME_LIMIT_S} s")


def case_rng(seed: int, target: str, index: int) -> random.Random:
    return random.Random(f"{seed}:{target}:{index}")


def run_range(target: Target, seed: int, start: int, stop: int) -> Stats:
    """Inputs ``start`` to ``stop`` of a set-up ``target``; the first example of each distinct failure is kept."""
    stats = Stats(target.name)
    faulthandler.enable()
    began = time.perf_counter()
    for index in range(start, stop):
        if index % 256 == 0:  # re-armed per batch: arming per input costs more than the smaller inputs
            faulthandler.dump_traceback_later(HARD_LIMIT_S, exit=True)
        case = target.generate(case_rng(seed, target.name, index))
        err = run_one(target, case)
        if err is not None:
            key = failure_key(err)
            stats.failures.setdefault(
                key, {"index": index, "error": f"{type(err).__name__}: {err}"[:500], "case": encode_case(case)}
            )
    faulthandler.cancel_dump_traceback_later()
    stats.inputs, stats.seconds = stop - start, time.perf_counter() - began
    return stats


def encode_case(obj: Any) -> Any:
    """``obj`` as JSON can hold it (a kept input is ``regressions/<target>/<name>.json``): bytes as base64."""
    if isinstance(obj, bytes):
        return {"$bytes": base64.b64encode(obj).decode()}
    if isinstance(obj, dict):
        return {"$dict": [[encode_case(k), encode_case(v)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return [encode_case(v) for v in obj]
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return {"$float": repr(obj)}
    return obj


def decode_case(obj: Any) -> Any:
    if isinstance(obj, dict):
        if "$bytes" in obj:
            return base64.b64decode(obj["$bytes"])
        if "$float" in obj:
            return float(obj["$float"])
        return {decode_case(k): decode_case(v) for k, v in obj["$dict"]}
    if isinstance(obj, list):
        return [decode_case(v) for v in obj]
    return obj


def save_regression(target: str, name: str, case: Any) -> Path:
    """Keep a crasher (as ``encode_case`` wrote it) for the suite to replay."""
    path = REGRESSIONS / target / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(case, indent=1, sort_keys=True) + "\n")
    return path


def regressions() -> list[tuple[str, Path]]:
    """Every kept (target, file), in a stable order."""
    return sorted((path.parent.name, path) for path in REGRESSIONS.glob("*/*.json"))


def load_regression(path: Path) -> dict[str, Any]:
    return decode_case(json.loads(path.read_text()))


def scratch_dir(name: str) -> str:
    """A per-process scratch directory on tmpfs when there is one (targets that need real files write many)."""
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    return tempfile.mkdtemp(prefix=f"mds-fuzz-{name}-", dir=base)
