"""Fixtures of the storage tests."""

from __future__ import annotations

import pytest


class VirtualClock:
    """Stands in for ``time`` in mds_core.storage.retrying: ``sleep`` returns at once, moves ``monotonic`` on by as
    much, and is recorded, so the store's waits are read exactly instead of measured on a loaded machine."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> VirtualClock:
    from mds_core.storage import retrying

    clock = VirtualClock()
    monkeypatch.setattr(retrying, "time", clock)
    return clock
