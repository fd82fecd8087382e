"""Every parameter of the public API is described in an ``Args:`` section (what docs/api.md renders)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import mds_core
from mds_core.versions import ShardSet


def _documented_object(name: str) -> Any:
    """The function or class behind a public name (``streams_registry`` is an instance: its class)."""
    obj = getattr(mds_core, name)
    return obj if inspect.isclass(obj) or inspect.isfunction(obj) else type(obj)


PUBLIC = [_documented_object(name) for name in mds_core.__all__ if name != "MDSError"] + [ShardSet]


def undocumented(func: Callable[..., Any], doc: str) -> list[str]:
    """The parameters of ``func`` that ``doc``'s ``Args:`` section does not describe."""
    args = doc.split("Args:", 1)[1] if "Args:" in doc else ""
    names = [p for p in inspect.signature(func).parameters.values() if p.name not in ("self", "cls")]
    star: dict[inspect._ParameterKind, str] = {
        inspect.Parameter.VAR_POSITIONAL: "*",
        inspect.Parameter.VAR_KEYWORD: "**",
    }
    return [p.name for p in names if not re.search(rf"^\s+{re.escape(star.get(p.kind, '') + p.name)}:", args, re.M)]


def entries(obj: Any) -> Iterator[tuple[str, Callable[..., Any], str]]:
    """(name, callable, its docstring) for a public function, or a class's constructor and public methods."""
    if not inspect.isclass(obj):
        yield obj.__name__, obj, inspect.getdoc(obj) or ""
        return
    yield f"{obj.__name__}()", obj.__init__, (inspect.getdoc(obj) or "") + (obj.__init__.__doc__ or "")
    for name, member in vars(obj).items():
        if not name.startswith("_") and inspect.isfunction(getattr(member, "__func__", member)):
            func = getattr(obj, name)
            yield f"{obj.__name__}.{name}", func, inspect.getdoc(func) or ""


@pytest.mark.parametrize("obj", PUBLIC, ids=lambda o: o.__name__)
def test_every_public_parameter_is_described(obj: Any) -> None:
    missing = {name: gaps for name, func, doc in entries(obj) if (gaps := undocumented(func, doc))}
    assert not missing, f"add an Args: entry for each of these: {missing}"


def test_a_parameter_left_out_of_args_is_reported() -> None:
    def planted(size: int, *names: str, **options: Any) -> None:
        """Planted.

        Args:
            size: described.
            *names: described.
        """

    assert undocumented(planted, planted.__doc__ or "") == ["options"]
