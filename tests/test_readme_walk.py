"""A new user's first hour: README.md walked top to bottom in a fresh copy of the checkout.

The copy holds the working tree's files (tests/readme_walk.py, ``copy_checkout``), not this suite's
``.venv``: ``make demo`` builds one the README's way (``make install``: torch, then the project with
constraints.txt), and every command after the README says to ``source .venv/bin/activate`` runs in a shell
that did, with nothing of the suite's environment (tests/readme_walk.py, ``new_user_env``). Each command runs
as written and must exit 0, with what the README promises in its output (``KNOWN``); the tour's Python block
runs twice, as a user trying it again would. The walk takes 7 to 13 minutes on 2 cores, depending on what
else runs (make install about 2, each make demo 1 to 4): make test-all.

``test_the_walk_knows_every_command`` is cheap and runs in make test: a command added to the README fails it
until tests/readme_walk.py says how to run it, or why it is not run.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.readme_walk import ACTIVATE, KNOWN, Step, copy_checkout, new_user_env, problems, steps


def test_the_walk_knows_every_command() -> None:
    assert not problems(), "\n".join(problems())


def test_a_command_the_walk_does_not_know_fails_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(KNOWN, "make defs")  # as if the README had just gained it
    monkeypatch.setitem(KNOWN, "mds frobnicate", KNOWN["dg check yaml"])  # and lost this one
    unknown, stale = problems()
    assert unknown.startswith("README.md:") and "`make defs` is new to the walk: say in KNOWN" in unknown
    assert stale == "KNOWN names `mds frobnicate`, which README.md no longer has"


def test_the_walk_runs_what_the_issue_found_broken() -> None:
    """Issue 40's commands are among those run, after the activation, and the tour runs twice."""
    run = [step.command for step in steps() if not step.skip and step.known and not step.known.skip]
    for command in ("make demo", ACTIVATE, "mds inspect data/demo", "make defs", "dg check yaml"):
        assert command in run, command
    assert run.index("make demo") < run.index(ACTIVATE) < run.index("mds inspect data/demo")
    assert len(KNOWN["python block: A tour"].expect) == 2


class Walker:
    """A shell session in the copy: each command in ``bash -e -o pipefail``, after ``source
    .venv/bin/activate`` once the README has said so; a log of every command's output and time."""

    def __init__(self, tmp: Path) -> None:
        self.cwd = copy_checkout(tmp / "clone")
        self.env = new_user_env(tmp)
        self.activated = False
        self.log = tmp / "walk.log"
        self.times: list[tuple[str, float]] = []

    def run(self, command: str, where: str) -> str:
        """Run ``command``; its standard output. A non-zero exit fails the test with both outputs."""
        script = (f"{ACTIVATE}\n" if self.activated else "") + command
        started = time.monotonic()
        shell = ["bash", "-e", "-o", "pipefail", "-c", script]
        done = subprocess.run(shell, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=900)
        seconds = time.monotonic() - started
        self.times.append((command, seconds))
        with self.log.open("a") as log:
            log.write(f"=== {where}: {command} (exit {done.returncode}, {seconds:.1f} s)\n{done.stdout}{done.stderr}\n")
        assert done.returncode == 0, (
            f"{where}: `{command}` exited {done.returncode}\n--- stdout:\n{done.stdout[-4000:]}\n"
            f"--- stderr:\n{done.stderr[-4000:]}"
        )
        return done.stdout

    def step(self, step: Step) -> None:
        known = step.known
        assert known is not None and not known.skip and not step.skip, step
        if step.command == ACTIVATE:
            self.run(ACTIVATE, step.where)  # it exists and works; later commands run after it
            self.activated = True
            return
        for number, expected in enumerate(known.expect, start=1):
            if step.code:  # a Python block: saved as a file, run as a user would
                (self.cwd / "readme_block.py").write_text(step.code)
                output = self.run("python readme_block.py", f"{step.where} (run {number})")
            else:
                output = self.run(step.command, step.where)
            for text in expected:
                assert text in output, f"{step.where}: `{step.command}` (run {number}) printed no {text!r}:\n{output}"


@pytest.mark.slow  # make install and two make demo runs: minutes (make test-all)
@pytest.mark.timeout(1800)
def test_a_new_user_walks_the_readme(tmp_path: Path) -> None:
    assert not problems(), "\n".join(problems())
    walker = Walker(tmp_path)
    skipped = []
    for step in steps():
        reason = step.skip or (step.known.skip if step.known else "")
        if reason:
            skipped.append(f"{step.where}: `{step.command}`: {reason}")
            continue
        walker.step(step)
    ran = "\n".join(f"{seconds:7.1f} s  {command}" for command, seconds in walker.times)
    print(f"ran:\n{ran}\nskipped:\n" + "\n".join(skipped))  # shown with -s or -rP
    assert walker.activated and len(walker.times) >= 15, ran
    shutil.rmtree(walker.cwd / ".venv")  # 3 GB; kept when the walk fails, to look into
