"""Run one page's code blocks in order, in one process: ``python -m tests.docs.run_page STEPS.json``.

Started by ``tests/docs/test_code_blocks.py`` in the page's scratch workspace (the current directory).
The page's setup and its ``python`` blocks run in one namespace, so a block sees what the blocks before it
defined and wrote; shell blocks run in ``bash -e -o pipefail`` in the same directory. A transcript
(``$ command`` lines, each followed by its output) and an ``output of:`` block compare what the command
prints with the page, after ``normalize``. The first failure ends the run with its block's location.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

# What differs from run to run, replaced by a token on both sides before comparing.
VOLATILE = [
    (re.compile(r"\d{8}T\d{6}-[0-9a-f]{8}"), "<transaction>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}"), "<time>"),
    (re.compile(r"[\d,]+(\.\d+)? samples/s"), "<n> samples/s"),
    (re.compile(r"(waited|slowest|decoded for|planned in) \d+\.\d+ s\b"), r"\1 <t> s"),
]
MARK = "@@docs-command-{}@@"


def normalize(text: str) -> list[str]:
    lines = []
    for line in text.rstrip("\n").splitlines():
        for pattern, token in VOLATILE:
            line = pattern.sub(token, line)
        lines.append(line.rstrip())
    return lines


def matches(expected: str, actual: str) -> bool:
    """``actual`` is ``expected`` line for line, where an expected line ``...`` stands for any lines."""
    pattern = "".join(
        r"(?:.*\n)*?" if line.strip() == "..." else re.escape(line) + r"\n" for line in normalize(expected)
    )
    return re.fullmatch(pattern, "\n".join(normalize(actual)) + "\n") is not None


def commands(text: str) -> list[str]:
    """The commands of a shell block: its lines, a line ending in ``\\`` joined with the next; no blank lines
    or comment lines."""
    found: list[str] = []
    continued = False
    for line in text.splitlines():
        if continued:
            found[-1] += "\n" + line
        elif line.strip() and not line.lstrip().startswith("#"):
            found.append(line)
        continued = line.endswith("\\")
    return found


def key(command: str) -> str:
    """A command without its trailing comment, continuations and extra spaces: what ``output of:`` names."""
    return " ".join(command.replace("\\\n", " ").split(" #")[0].split())


def shell(text: str, where: str, outputs: dict[str, str]) -> str:
    """Run a shell block in one ``bash``, recording each command's output in ``outputs``; the whole output."""
    lines = commands(text)
    script = "\n".join(f"printf '\\n{MARK.format(i)}\\n'\n{command}" for i, command in enumerate(lines))
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    parts = re.split(r"\n@@docs-command-\d+@@\n", done.stdout)[1:]
    for command, output in zip(lines, parts):
        outputs[key(command)] = output
    if done.returncode != 0:
        raise SystemExit(
            f"{where}: exit status {done.returncode} from\n{lines[len(parts) - 1]}\n--- output:\n{parts[-1]}"
        )
    return "".join(parts)


def compare(expected: str, actual: str, command: str, where: str) -> None:
    if not matches(expected, actual):
        raise SystemExit(
            f"{where}: the output of\n{command}\ndiffers from the page.\n--- page:\n{expected}\n--- actual:\n{actual}"
        )


def transcript(text: str) -> list[tuple[str, str]]:
    """``(command, expected output)`` pairs of a ``$ command`` session (``\\`` continues a command)."""
    pairs: list[tuple[str, list[str]]] = []
    continued = False
    for line in text.rstrip("\n").splitlines():
        if line.startswith("$ ") or continued:
            if continued:
                pairs[-1] = (pairs[-1][0] + "\n" + line, pairs[-1][1])
            else:
                pairs.append((line[2:], []))
            continued = line.endswith("\\")
        else:
            pairs[-1][1].append(line)
    return [(command, "\n".join(output) + "\n" if output else "") for command, output in pairs]


def main(steps_path: str) -> None:
    steps = json.loads(Path(steps_path).read_text())
    namespace: dict = {"__name__": "__main__"}
    outputs: dict[str, str] = {}  # each shell command's output, by key(command)
    started = time.monotonic()
    for step in steps:
        where, kind, text = step["where"], step["kind"], step["text"]
        print(f"--- {where} ({kind}) at {time.monotonic() - started:.1f} s", flush=True)
        if kind == "python":
            page, line = where.split()[0].rsplit(":", 1)
            before = "before " if where.endswith("(before)") else ""
            code = compile(
                ("" if before else "\n" * int(line)) + text, f"before {page}:{line}" if before else page, "exec"
            )
            exec(code, namespace)
        elif kind == "shell":
            shell(text, where, outputs)
        elif kind == "transcript":
            for command, expected in transcript(text):
                compare(expected, shell(command, where, outputs), command, where)
        elif kind == "output of":  # the output of a command a block above ran, or of running it now
            command = step["command"]
            actual = outputs[key(command)] if key(command) in outputs else shell(command, where, outputs)
            compare(text, actual, command, where)
        else:
            raise SystemExit(f"{where}: unknown step {kind!r}")
    print(f"--- all blocks ran in {time.monotonic() - started:.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
