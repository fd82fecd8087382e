"""README.md as a new user reads it: every shell command, in order, and what the walk does with each.

``tests/test_readme_walk.py`` runs the walk; this module finds the commands and knows them. A command is a
line of a ``bash`` block (``tests/docs/blocks.py`` finds the blocks and their annotations), or an inline code
span in the prose that starts with a command word (``mds inspect data/demo``). Each one is run as written,
or skipped with a reason: a block annotated ``<!-- not run: REASON -->`` skips its lines for that reason;
every other command must be in ``KNOWN``, so a command added to the README that the walk does not know fails
``test_the_walk_knows_every_command`` until someone says how to run it (or why not). An inline span that
repeats a command already run is a mention of it (``the shard set `make demo` publishes``), not run again.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.docs.blocks import ROOT, blocks
from tests.docs.run_page import commands, key

README = "README.md"
COMMAND_WORDS = {"mds", "dg", "make", "dagster", "python", "python3", "pip", "source", "export", "bash", "sh"}
COMMAND_WORDS |= {"sudo", "apt-get", "git", "npm", "npx", "cd", "uv", "pytest", "docker", "curl", "java"}
ACTIVATE = "source .venv/bin/activate"


@dataclass(frozen=True)
class Known:
    """What the walk does with a command: runs it (``skip`` empty) and finds each of ``expect`` in its
    standard output, one tuple per run; or skips it, for the reason ``skip`` gives."""

    skip: str = ""
    expect: tuple[tuple[str, ...], ...] = ((),)


NAME = "a name in the prose, not a command line"
SERVES = "serves until stopped"
KNOWN: dict[str, Known] = {
    "make demo": Known(expect=(("<- published",),)),
    "make test": Known(skip="the gate, whose suite holds this test (make test-all runs it)"),
    "make test-all": Known(skip="the whole suite, this test included"),
    "make fuzz": Known(skip="100,000 inputs per parser, half an hour (tests/fuzz/test_fuzz_slice.py runs a slice)"),
    "make soak": Known(skip="ten minutes of load (tests/soak/test_soak_short.py runs a small one)"),
    "make test-delta-spark": Known(skip="Spark fetches Delta Lake's jars from Maven, which this machine cannot reach"),
    "make ui": Known(skip=f"{SERVES} (tests/e2e/test_quiet.py starts dg dev as make ui does)"),
    "make docs": Known(),
    "dagster code-server start": Known(skip=f"{SERVES} (tests/deploy/test_code_server.py serves the wheel)"),
    ACTIVATE: Known(),  # every command after it runs in a shell that sourced it
    ".venv/bin/": Known(skip="a prefix: the other way to reach the same commands"),
    "make": Known(skip=NAME),
    "mds": Known(skip=NAME),
    "dg": Known(skip=NAME),
    "python": Known(skip=NAME),
    "dagster": Known(skip=NAME),
    "mds plan": Known(skip="names the command; the tour's sentence runs it with arguments"),
    "mds inspect data/demo": Known(expect=(("columns",),)),
    "mds verify data/demo": Known(expect=(("OK:",),)),
    "mds check-loader data/demo": Known(expect=(("OK:",),)),
    "mds versions list data/sets/demo": Known(),
    "mds plan data/demo --world 2x8x4 --batch-size 32": Known(),  # its output is mds plan's tests' business
    "make defs": Known(expect=(("All component YAML validated successfully.", "digits/shard_set"),)),
    "dg check yaml": Known(expect=(("All component YAML validated successfully.",),)),
    "dg list defs --columns key,group,kinds": Known(expect=(("digits/shard_set",),)),
    ".venv/bin/python examples/train_digits.py --checkpoint data/run.pt --fresh --stop-after-steps 20": Known(
        expect=(("stopping after step 20 (",),)
    ),
    ".venv/bin/python examples/train_digits.py --checkpoint data/run.pt": Known(
        expect=(("resuming data/run.pt at step 21 (", "epoch 4 done at step"),)
    ),
    "mds versions rollback data/shard-sets/digits": Known(),
    "mds versions publish data/shard-sets/digits 2": Known(),
    # The tour's Python, saved as a file and run twice: the second run must work too, as the comments say.
    "python block: A tour": Known(expect=(("doc 7\n1 [1]\n",), ("doc 7\n2 [1, 2]\n",))),
}


@dataclass(frozen=True)
class Step:
    where: str  # README.md:LINE
    command: str  # as written, without its comment; "python block: SECTION" for a Python block
    skip: str = ""  # why it is not run, or ""
    code: str = ""  # a Python block's text
    inline: bool = False  # a code span in the prose, not a block's line

    @property
    def known(self) -> Known | None:
        return KNOWN.get(self.command)


def is_command(span: str) -> bool:
    """An inline code span that is a shell command line: it starts with a command word or a venv's bin/."""
    words = span.split()
    return bool(words) and (words[0] in COMMAND_WORDS or words[0].startswith((".venv/bin/", "./")))


def _section(lines: list[str], line: int) -> str:
    """The ``## `` heading above line ``line`` (from 1)."""
    return next((text[3:].strip() for text in reversed(lines[: line - 1]) if text.startswith("## ")), "")


def steps(page: str = README) -> list[Step]:
    """Every command of ``page`` in reading order; a block's ``not run`` reason on each of its lines, and
    "a mention" on an inline span of a command run above it."""
    lines = (ROOT / page).read_text().splitlines()
    found: list[tuple[int, Step]] = []
    prose = list(lines)
    for block in blocks(page):
        end = block.line + block.text.count("\n") + 1  # the closing fence's line
        prose[block.line - 1 : end] = [""] * (end - block.line + 1)
        reason = block.argument if block.kind == "not run" else ""
        if block.lang in ("bash", "shell", "sh", "console"):
            found += [(block.line, Step(block.where, key(command), reason)) for command in commands(block.text)]
        elif block.lang == "python":
            found.append(
                (block.line, Step(block.where, f"python block: {_section(lines, block.line)}", reason, block.text))
            )
    text = "\n".join(re.sub(r"<!--.*?-->", "", line) for line in prose)
    for match in re.finditer(r"`([^`]+)`", text):
        span = " ".join(match[1].split())
        if is_command(span):
            line = text.count("\n", 0, match.start()) + 1
            found.append((line, Step(f"{page}:{line}", span, inline=True)))
    ordered: list[Step] = []
    ran: dict[str, str] = {}  # command: where it ran first
    for _, step in sorted(found, key=lambda item: item[0]):
        if step.inline and step.command in ran:
            step = Step(step.where, step.command, f"a mention of `{step.command}`, run at {ran[step.command]}")
        elif not step.skip and step.known and not step.known.skip:
            ran.setdefault(step.command, step.where)
        ordered.append(step)
    return ordered


def block_under(section: str, lang: str, page: str = README) -> str:
    """The text of the first ``lang`` block in the ``## section`` of ``page``."""
    lines = (ROOT / page).read_text().splitlines()
    return next(block.text for block in blocks(page) if block.lang == lang and _section(lines, block.line) == section)


def problems(page: str = README) -> list[str]:
    """Commands the walk does not know, and entries of ``KNOWN`` the page no longer has."""
    found = steps(page)
    unknown = [
        f"{step.where}: `{step.command}` is new to the walk: say in KNOWN (tests/readme_walk.py) how to run it, or why not"
        for step in found
        if not step.skip and not step.known
    ]
    stale = sorted(set(KNOWN) - {step.command for step in found})
    return unknown + [f"KNOWN names `{command}`, which {page} no longer has" for command in stale]


# ---------------------------------------------------------------------------------------------------------
# The walk's machinery: a fresh copy of the checkout, and a shell without the suite's environment in it


def copy_checkout(to: Path) -> Path:
    """The working tree's files as git sees them (tracked and untracked, not ignored; edits not yet
    committed included), copied to ``to``: what a fresh clone of this state would hold, without .venv."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in sorted(set(filter(None, listed.split("\0")))):
        source, target = ROOT / name, to / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree, not yet committed
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    return to


def new_user_env(tmp: Path) -> dict[str, str]:
    """This process's environment without what the suite adds: no active virtual environment (on PATH or
    in ``VIRTUAL_ENV``), no ``PYTHONPATH``, no ``MDS_``/``DAGSTER_``/cloud settings; a private TMPDIR."""
    venvs = {str(ROOT / ".venv" / "bin"), str(Path(sys.executable).parent)}
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("MDS_", "DAGSTER_", "AWS_", "S3_", "DATABRICKS_", "AZURE_", "GOOGLE_", "PYTEST_"))
        and name not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "README_TEST_TRACE")
    }
    path = [entry for entry in env.get("PATH", os.defpath).split(os.pathsep) if entry and entry not in venvs]
    (tmp / "tmp").mkdir(exist_ok=True)
    env.update(PATH=os.pathsep.join(path), TMPDIR=str(tmp / "tmp"))
    return env
