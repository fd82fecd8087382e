"""Heavy fixtures start once per run: the tests that use one are scheduled on the same xdist worker.

A classic Spark session lives inside the process that made it, and a Spark Connect server, a `dg dev`
webserver, a standalone cluster or the reference's process reading every interop dataset takes 10 s to
minutes to start. With `pytest -n 2`, a session-scoped
fixture starts once per worker that asks for it, so every test using one is put in one *group*, and a
group runs whole on one worker (``GroupScheduling``). xdist's own ``--dist loadgroup`` would do this with
``xdist_group`` markers, but it renames node ids through an attribute pytest 9.2 no longer reads, so it
silently stops grouping; here the group comes from the test's folder instead, and ``check_groups``
fails the collection when a test outside a group's folders asks for the group's fixture.

Tests outside every group are scheduled one by one, as with ``--dist load``; groups go out first,
largest first, so the long chains start at once.
"""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling

# group -> (the folders whose tests run in it, the fixtures that only its worker may start)
GROUPS: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    "spark": (
        ("tests/spark/", "tests/pipelines/"),
        frozenset({"spark", "classic_spark", "connect_spark", "spark_session", "spark_connect_server"}),
    ),
    "dagster-dev": (("tests/e2e/",), frozenset({"dagster_dev"})),
    "spark-cluster": (("tests/cluster/",), frozenset({"spark_cluster"})),
    # One reference process reads every dataset the module writes (a module fixture): once, not per worker.
    "reference-reads": (("tests/test_interop.py",), frozenset({"reference_reads_ours"})),
    # The wheel and its fresh environment (a minute of installs), built once for both of the module's tests.
    "wheel": (("tests/deploy/test_wheel.py",), frozenset({"wheel_env"})),
}


def group_of(nodeid: str) -> str | None:
    for name, (folders, _) in GROUPS.items():
        if nodeid.startswith(folders):
            return name
    return None


class GroupScheduling(LoadScopeScheduling):
    """``--dist load`` for ungrouped tests; each group is one unit of work, so one worker runs all of it."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid) or nodeid


def check_groups(items: list[pytest.Item]) -> None:
    """A test that uses a group's fixture from outside the group's folders would start a second copy."""
    strays = []
    for item in items:
        for name, (folders, fixtures) in GROUPS.items():
            used = fixtures & set(getattr(item, "fixturenames", ()))
            if used and not item.nodeid.startswith(folders):
                strays.append(f"{item.nodeid} uses {sorted(used)} of group {name!r} (folders {list(folders)})")
    if strays:
        raise pytest.UsageError(
            "heavy fixtures used outside their group; move the tests or add the folder to tests/heavy.py:\n  "
            + "\n  ".join(strays)
        )
