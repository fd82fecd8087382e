"""The reference's golden order cases (tests/fixtures/order-golden), shared by the order tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mds_core.errors import ConfigurationError

ORDER_GOLDEN = Path(__file__).parent.parent / "fixtures" / "order-golden"


def golden(name: str) -> dict:
    """One fixture file of the reference's cases, e.g. ``golden("shuffle")["cases"]``."""
    return json.loads((ORDER_GOLDEN / f"{name}.json").read_text())


def check_case(case: dict, compute: Callable[[], np.ndarray], ids: str) -> None:
    """We refuse what the reference refused (``case["error"]``), or return its int64 array exactly."""
    if "error" in case:
        with pytest.raises(ConfigurationError):
            compute()
        return
    got = compute()
    assert got.dtype == np.int64
    if "shape" in case:
        assert list(got.shape) == case["shape"]
    np.testing.assert_array_equal(got.ravel(), np.asarray(case[ids], np.int64))


def without_trailing_padding(batches: np.ndarray) -> np.ndarray:
    """Global batches (rows) up to the last one that holds a sample: the trailing all-padding (-1) ones dropped."""
    real = np.flatnonzero((batches >= 0).any(axis=1))
    return batches[: real[-1] + 1 if len(real) else 0]
