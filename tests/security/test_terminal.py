"""Finding 10 of the review: column names and manifest strings reached the terminal with their escape
sequences (``ESC ] 0 ; title BEL`` sets a terminal's title; others rewrite or hide lines)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mds_core import MDSWriter
from mds_core.cli import main
from mds_core.cli.common import show_text
from mds_core.versions import ShardSet
from tests.security.conftest import commit_ids, write_ids

TITLE = "\x1b]0;owned-title\x07"
SHOWN = "\\x1b]0;owned-title\\x07"


def _no_control_bytes(text: str) -> None:
    assert not [c for c in text if c not in "\n" and (ord(c) < 32 or 0x7F <= ord(c) < 0xA0)], repr(text)


def test_inspect_and_head_show_a_hostile_column_name_escaped(tmp_path: Path) -> None:
    with MDSWriter(out=str(tmp_path), columns={f"{TITLE}x": "str"}) as writer:
        writer.write({f"{TITLE}x": f"value{TITLE}"})
    for command in (["inspect"], ["head", "-n", "1"]):
        result = CliRunner().invoke(main, [*command, str(tmp_path)])
        assert result.exit_code == 0, result.output
        _no_control_bytes(result.output)
        assert f"{SHOWN}x" in result.output


def test_versions_show_manifest_strings_escaped(tmp_path: Path) -> None:
    commit_ids(ShardSet(str(tmp_path)), [1], lineage={"source": f"table{TITLE}"})
    manifest = tmp_path / "_versions" / "00000001.json"
    record = json.loads(manifest.read_text())
    record["created"] = f"2026-12-01T00:00:00{TITLE}"
    manifest.write_text(json.dumps(record))
    for args in (["list", str(tmp_path)], ["show", str(tmp_path), "1"]):
        result = CliRunner().invoke(main, ["versions", *args])
        assert result.exit_code == 0, result.output
        _no_control_bytes(result.output)
    assert SHOWN in result.output


def test_an_error_naming_a_hostile_string_is_escaped(tmp_path: Path) -> None:
    write_ids(str(tmp_path), [1])
    index = json.loads((tmp_path / "index.json").read_text())
    index["shards"][0]["column_encodings"] = [f"int{TITLE}"]
    (tmp_path / "index.json").write_text(json.dumps(index))
    result = CliRunner().invoke(main, ["head", str(tmp_path)])
    assert result.exit_code == 2 and SHOWN in result.output
    _no_control_bytes(result.output)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("line\nnext", "line\nnext"),
        ("\u202eevil", "\\u202eevil"),
        ("caf\u00e9 \u00e8", "caf\u00e9 \u00e8"),
        ("\x9b31m", "\\x9b31m"),
        ("tab\there", "tab\\there"),
    ],
)
def test_show_text_escapes_controls_and_keeps_lines(text: str, shown: str) -> None:
    assert show_text(text) == shown
