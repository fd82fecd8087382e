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


@pytest.fixture
def no_credentials(s3_server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loopback server's endpoint, and no AWS credentials anywhere botocore looks (nor an instance to ask)."""
    import os

    for name in [name for name in os.environ if name.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
