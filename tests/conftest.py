import shutil
from pathlib import Path

import pytest

from tests.golden import GOLDEN


@pytest.fixture
def golden_copy(tmp_path: Path):
    """A writable copy of one golden dataset (reading compressed shards writes raw files beside them)."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(GOLDEN / "datasets" / name, target)
        return target

    return copy
