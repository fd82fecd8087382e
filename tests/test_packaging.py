"""What an error tells users to install exists: every extra named in a message is declared and installs
the package the message names."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from mds_core.format.compression import _EXTRAS
from mds_core.storage.stores import STORES

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _names(extra: str) -> set[str]:
    """The distribution names an extra installs (normalised), following references to other extras."""
    names = set()
    for requirement in EXTRAS[extra]:
        name = re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0]
        if name == "mds-pipelines":
            extras = re.search(r"\[(.*)\]", requirement)
            assert extras is not None, requirement
            for inner in extras.group(1).split(","):
                names |= _names(inner.strip())
        else:
            names.add(name.lower().replace("-", "_"))
    return names


@pytest.mark.parametrize(
    ("scheme", "module", "extra"),
    [(s, k.package, k.extra) for k in STORES.values() if k.package is not None for s in k.schemes],
)
def test_every_store_backend_names_an_extra_that_installs_it(scheme: str, module: str, extra: str) -> None:
    assert extra in EXTRAS, f"{scheme}:// tells users to install the missing extra [{extra}]"
    assert module.replace(".", "_") in _names(extra), f"[{extra}] does not install {module}, which {scheme}:// needs"


@pytest.mark.parametrize(("family", "package", "extra"), [(f, p, e) for f, (p, e) in sorted(_EXTRAS.items())])
def test_every_compression_names_an_extra_that_installs_it(family: str, package: str, extra: str) -> None:
    assert package.lower().replace("-", "_") in _names(extra)


def test_table_to_mds_needs_only_the_arrow_extra() -> None:
    assert _names("arrow") == {"pyarrow"} and "pyarrow" in _names("spark") and "pyarrow" in _names("all")


def test_without_pyarrow_the_converter_says_which_extra_to_install() -> None:
    script = textwrap.dedent("""
        import sys
        sys.modules["pyarrow"] = None  # as if it were not installed
        try:
            from mds_core.convert import table_to_mds
        except ImportError as err:
            print(type(err).__name__, err)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == (
        "MissingDependencyError mds_core.convert needs pyarrow: pip install "
        "'mds-pipelines[arrow]' (or '[spark]' for dataframe_to_mds)"
    )
