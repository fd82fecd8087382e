"""Argument checks shared by the order functions."""

from __future__ import annotations

from typing import Any

import numpy as np

from mds_core.errors import ConfigurationError


def as_int(name: str, value: Any, minimum: int | None = 1) -> int:
    """``value`` as an int, refusing bools, non-integers and values below ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigurationError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigurationError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)
