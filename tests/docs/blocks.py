"""The fenced code blocks of README.md and docs/*.md, and what each one's annotation says.

A block's annotation is the HTML comment on the line just above its opening fence (indented like
the fence inside a list item):

* ``<!-- not run: REASON -->``: the block cannot run in a test; the reason says why.
* ``<!-- run by tests/PATH.py -->`` (or ``tests/PATH.py::test_name``; ``checked by`` reads the same):
  another test runs these lines or checks this text; the file, and the test if named, must exist.
* ``<!-- output of: COMMAND -->``: a text block that is COMMAND's output; the page's run runs COMMAND
  at that point and compares.
* ``<!-- signature of: module.function -->``: a Python signature, compared with the function's own.

A block without one runs (``python``, ``bash``/``shell``/``console``) or is parsed (``yaml``, ``json``,
``toml``) by ``tests/docs/test_code_blocks.py``; a ``text`` or unlabelled block needs an annotation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
COMMENT = re.compile(r"^\s*<!--\s*(?P<body>.*?)\s*-->\s*$")
RUN_LANGS = {"python": "python", "bash": "shell", "shell": "shell", "sh": "shell", "console": "shell"}
PARSED_LANGS = {"yaml", "json", "toml"}


@dataclass(frozen=True)
class Block:
    page: str  # relative to the project root: README.md, docs/format.md
    line: int  # of the opening fence, from 1
    lang: str  # "" for an unlabelled block
    text: str  # the lines between the fences, the fence's indentation removed
    note: str  # the annotation's text ("not run: ..."), or ""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def kind(self) -> str:
        """not run, run by, output of, signature of; or what the test does with an unannotated block."""
        for kind in ("not run", "run by", "checked by", "output of", "signature of"):
            if self.note.startswith(kind + ":") or self.note.startswith(kind + " "):
                return "run by" if kind == "checked by" else kind
        if self.note:
            return "unknown annotation"
        if self.lang in RUN_LANGS:
            return RUN_LANGS[self.lang]
        if self.lang in PARSED_LANGS:
            return "parsed"
        return "unannotated"

    @property
    def argument(self) -> str:
        """What follows the annotation's kind: the reason, the test, the command, the function."""
        kind = "checked by" if self.note.startswith("checked by") else self.kind
        return self.note[len(kind) :].lstrip(":").strip()

    @property
    def is_transcript(self) -> bool:
        """A shell block written as a session: ``$ command`` lines, each followed by its output."""
        first = next((line for line in self.text.splitlines() if line.strip()), "")
        return RUN_LANGS.get(self.lang) == "shell" and first.startswith("$ ")


def pages() -> list[str]:
    """README.md and every page of the site, in a stable order."""
    return ["README.md"] + sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))


def blocks(page: str) -> list[Block]:
    """Every fenced block of ``page``, in order."""
    lines = (ROOT / page).read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence = len(match["indent"]), match["fence"]
        close = re.compile(rf"^ *{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = next((j for j in range(i + 1, len(lines)) if close.match(lines[j])), None)
        if end is None:
            raise ValueError(f"{page}:{i + 1}: a code block that is never closed")
        body = "\n".join(_dedent(line, indent) for line in lines[i + 1 : end])
        above = COMMENT.match(lines[i - 1]) if i else None
        found.append(Block(page, i + 1, match["lang"], body + "\n", above["body"] if above else ""))
        i = end + 1
    return found


def _dedent(line: str, indent: int) -> str:
    """``line`` without the fence's indentation (a list item's), and no more."""
    return line[min(indent, len(line) - len(line.lstrip(" "))) :]


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks(page)]


def page_text(page: str) -> str:
    """The text of ``page``, a path from the project root."""
    return (ROOT / page).read_text()


def section(text: str, heading: str) -> str:
    """From the line ``heading`` (``## Speed``) to the next heading of the same level or above."""
    assert f"\n{heading}\n" in text, f"no section {heading!r}"
    start = text.index(f"\n{heading}\n")
    ends = [m.start() for m in re.finditer(rf"\n#{{1,{len(heading.split()[0])}}} ", text) if m.start() > start]
    return text[start : ends[0] if ends else len(text)]
