"""Minimal stand-in for torchvision, enough for ``import streaming`` (see ../README.md)."""

__version__ = "0.0.0+mds-bench-stub"

from torchvision import datasets, transforms  # noqa: E402,F401
