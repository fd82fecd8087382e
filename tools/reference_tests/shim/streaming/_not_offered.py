"""Placeholders for the reference's modules and names that mds_core deliberately does without.

Importing one works, so a test file that imports it at the top still collects; using one raises
``NotImplementedError``. The tests that use them are not public-API tests and are deselected.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any, NoReturn

MODULES = (
    "streaming.base.array",
    "streaming.base.constant",
    "streaming.base.distributed",
    "streaming.base.format.json",
    "streaming.base.format.xsv",
    "streaming.base.registry_utils",
    "streaming.base.shared",
    "streaming.base.spanner",
    "streaming.base.storage",
    "streaming.multimodal",
    "streaming.text",
    "streaming.vision",
)


class NotOffered:
    """A reference name mds_core does not offer: any use raises."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _refuse(self) -> NoReturn:
        raise NotImplementedError(f"{self._name} is not part of mds_core (see tools/reference_tests)")

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    def __getattr__(self, attr: str) -> NoReturn:
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._refuse()


class _PlaceholderModule(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return NotOffered(f"{self.__name__}.{attr}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if any(fullname == name or fullname.startswith(name + ".") for name in MODULES):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _PlaceholderModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []


def install() -> None:
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
