"""What the pages say about the code, checked against it: commands and options, examples of output and of
bytes, field lists, the layer picture. Each test is named in the annotation of the block it checks
(``<!-- checked by tests/docs/test_claims.py::... -->``) or in the page's source next to the claim."""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import numpy as np
import pytest

from tests.docs.blocks import Block, all_blocks, blocks, page_text, pages
from tests.docs.tables import TABLES, shown_tables


def _block(page: str, starts: str) -> Block:
    [found] = [block for block in blocks(page) if block.text.lstrip().startswith(starts)]
    return found


# ---------------------------------------------------------------------------------------------------------
# docs/format.md


FORMAT_COLUMNS = {"a": "int", "b": "bytes", "f32": "float32", "nd": "ndarray:int16:2,3", "s": "str"}
FORMAT_SAMPLE = {"a": 1, "b": b"x", "f32": 1.5, "nd": np.array([[1, 2, 3], [4, 5, 6]], np.int16), "s": "é"}


def test_the_documented_sample_and_index_are_the_writers(tmp_path: Path) -> None:
    """docs/format.md's sample, byte for byte, and its index.json: three copies of it, written with two hashes."""
    from mds_core import MDSWriter

    with MDSWriter(out=str(tmp_path / "ds"), columns=FORMAT_COLUMNS, hashes=["sha1", "xxh3_64"]) as writer:
        for _ in range(3):
            writer.write(FORMAT_SAMPLE)
    index = json.loads((tmp_path / "ds" / "index.json").read_text())
    shard = (tmp_path / "ds" / "shard.00000.mds").read_bytes()
    count = int.from_bytes(shard[:4], "little")
    offsets = np.frombuffer(shard[4 : 4 * (count + 2)], "<u4")
    sample = shard[offsets[0] : offsets[1]]
    block = _block("docs/format.md", "01000000 02000000")
    documented = "".join(
        "".join(re.findall(r"^[0-9a-f ]+?(?=\s{2,}|$)", line)[0].split()) for line in block.text.splitlines()
    )
    assert documented == sample.hex() and f"is {len(sample)} bytes:" in page_text("docs/format.md")
    assert index["shards"][0]["samples"] == count == 3
    documented = json.loads(_block("docs/format.md", '{"shards": [{"column_encodings"').text)
    written_hashes = index["shards"][0]["raw_data"]["hashes"]
    for name, digest in documented["shards"][0]["raw_data"]["hashes"].items():
        assert written_hashes[name].startswith(digest.removesuffix("...")), name
        documented["shards"][0]["raw_data"]["hashes"][name] = written_hashes[name]
    assert documented == index


# ---------------------------------------------------------------------------------------------------------
# The mds command


def _mds_commands() -> dict[str, click.Command]:
    """Every ``mds`` command by its path ("inspect", "versions list")."""
    from mds_core import cli

    def walk(command: click.Command, path: str) -> dict[str, click.Command]:
        if not isinstance(command, click.Group):
            return {path: command}
        return {
            found: c
            for name, sub in command.commands.items()
            for found, c in walk(sub, f"{path} {name}".strip()).items()
        }

    return walk(cli.main, "")


def _options(command: click.Command) -> set[str]:
    return {o for p in command.params for o in [*p.opts, *getattr(p, "secondary_opts", [])] if o.startswith("-")}


def _operations_table() -> list[str]:
    """docs/operations.md's command table: a row per command."""
    text = page_text("docs/operations.md")
    return text[text.index("| command | what |") : text.index("PATH is a dataset directory")].strip().splitlines()[2:]


MDS_USE = re.compile(r"(?:^|[`\s$(])mds ((?:[a-z][a-z-]*)(?: [a-z]+)?)((?:[^`\n]|\\\n)*)")


def _mds_uses() -> list[tuple[str, str, str]]:
    """``(where, command words, the rest)`` for every ``mds ...`` in the pages' code and code spans."""
    uses = []
    for page in pages():
        code = [(b.where, b.text) for b in blocks(page) if b.lang in ("bash", "console", "") or "mds " in b.text]
        spans = [(f"{page} (inline)", span) for span in re.findall(r"`([^`\n]*mds [^`\n]*)`", page_text(page))]
        for where, text in code + spans:
            for line in re.split(r"\n(?!\s)", text):
                for match in MDS_USE.finditer(line):
                    uses.append((where, match[1], match[2]))
    return uses


def test_every_mds_command_and_option_the_docs_name_exists() -> None:
    commands = {path: _options(command) for path, command in _mds_commands().items()}
    problems, checked = [], 0
    for where, words, rest in _mds_uses():
        name = words if words in commands else words.split()[0]
        if name not in commands:
            if words == "versions" and not rest.strip():
                continue  # the group itself: "the `mds versions` command"
            problems.append(f"{where}: mds {words}: no such command")
            continue
        checked += 1
        for option in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", rest.split(" #")[0]):
            if option not in commands[name]:
                problems.append(f"{where}: mds {name} has no option {option}")
    assert not problems, "\n".join(problems)
    assert checked > 40, checked


def test_the_operations_table_lists_every_command_and_option() -> None:
    """docs/operations.md's command table: a row per command, each option the command has."""
    rows = {}
    for row in _operations_table():
        match = re.match(r"\| `mds ((?:versions )?[a-z-]+)([^`]*)`", row)
        assert match, row
        rows[match[1]] = set(re.findall(r"(--[a-z][a-z-]*|-n\b)", match[2]))
    commands = {path: _options(command) for path, command in _mds_commands().items()}
    assert set(rows) == set(commands), set(commands) ^ set(rows)
    for name, options in rows.items():
        expected = commands[name] - {"-h", "--help", "--num"}
        if name == "plan":  # "(and the order options of `check-order`)"
            expected -= commands["check-order"] - {"--world", "--resume", "--global-batch"}
        assert options == expected, (name, options ^ expected)


# ---------------------------------------------------------------------------------------------------------
# Loader telemetry (docs/operations.md, docs/planning.md)


def test_the_metrics_example_has_the_loaders_fields(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mds_core import StreamingDataLoader, StreamingDataset
    from tests.docs.setups import small_dataset

    monkeypatch.setenv("MDS_JOB_ROOT", str(tmp_path / "jobs"))
    small_dataset(str(tmp_path / "ds"), rows=64)
    loader = StreamingDataLoader(StreamingDataset(local=str(tmp_path / "ds"), batch_size=8), batch_size=8)
    for _ in loader:
        pass
    metrics = loader.metrics()
    shown = re.sub(r",\s*\.\.\.", "", _block("docs/operations.md", '{"rank": 0').text)  # "..." elides fields
    example = json.loads(shown)
    assert list(example) == list(metrics)
    assert list(example["workers"][0]) == list(metrics["workers"][0])
    assert set(example["totals"]) <= set(metrics["totals"])
    # the field tables below the example name exactly these fields
    text = page_text("docs/operations.md")
    section = text[text.index("Measured in the training loop's process:") : text.index("Every figure covers")]
    tabled = re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE)
    assert tabled == [k for k in metrics if k not in ("workers", "totals")] + list(metrics["workers"][0])[1:]
    [counters] = (tmp_path / "jobs").rglob("metrics-r0-w0.f64")
    assert f"`metrics-r<rank>-w<worker>.f64` ({counters.stat().st_size} bytes each)" in " ".join(text.split())


# ---------------------------------------------------------------------------------------------------------
# docs/architecture.md


def test_the_layer_picture_is_the_import_contract() -> None:
    import tomllib

    contract = next(
        c
        for c in tomllib.loads(page_text("pyproject.toml"))["tool"]["importlinter"]["contracts"]
        if c["id"] == "layers"
    )
    picture = _block("docs/architecture.md", "pipelines")
    rows = [re.findall(r"\b(pipelines|mds_core\.\w+)", line) for line in picture.text.splitlines()]
    drawn = [sorted(set(row)) for row in rows if row]
    assert drawn == [sorted(layer.split(" | ")) for layer in contract["layers"]]


def test_no_block_is_left_out() -> None:
    """Every page's blocks are found (a fence the parser missed would escape every check)."""
    for page in pages():
        fences = len(re.findall(r"^\s*(```|~~~)", page_text(page), re.MULTILINE))
        assert fences == 2 * len(blocks(page)), page
    assert len(all_blocks()) > 80


# ---------------------------------------------------------------------------------------------------------
# Tables rendered from the code (tests/docs/tables.py), and the Dagster instance's settings


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_tables_are_rendered_from_the_code(name: str) -> None:
    shown = {table: (page, text) for page in pages() for table, text in shown_tables(page).items()}
    assert set(shown) == set(TABLES), "a page marks a table that tables.py does not render, or the reverse"
    page, text = shown[name]
    assert text == TABLES[name](), f"{page}'s table {name} should read:\n\n{TABLES[name]()}\n"


def test_the_instance_settings_are_the_packaged_ones() -> None:
    """docs/operations.md's block of settings is pipelines/dagster.yaml's, all but the UI's telemetry and nux."""
    import yaml

    packaged = yaml.safe_load(page_text("pipelines/dagster.yaml"))
    shown = yaml.safe_load(_block("docs/operations.md", "concurrency:").text)
    assert shown == {key: value for key, value in packaged.items() if key not in ("telemetry", "nux")}


def test_the_writer_arguments_table_has_the_writers_defaults() -> None:
    import inspect

    from mds_core import MDSWriter
    from mds_core.storage import output
    from mds_core.writer import mds_writer

    text = page_text("docs/format.md")
    table = text[text.index("| argument | default | meaning |") : text.index("Any other keyword raises")]
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+?) \|", table, re.MULTILINE))
    parameters = {name: p.default for name, p in inspect.signature(MDSWriter).parameters.items() if name != "kwargs"}
    opened = inspect.signature(output.open_output).parameters
    assert "workers = max_workers or 4" in inspect.getsource(output.RemoteOutput)
    passed_on = {  # the keywords MDSWriter takes through **kwargs, with the defaults it gives them
        "exist_ok": opened["exist_ok"].default,
        "retry": opened["retry"].default,
        "max_workers": 4,
        "progress_bar": False,
    }
    assert set(passed_on) == mds_writer._WRITER_KWARGS
    assert set(rows) == set(parameters) | set(passed_on)
    for name, documented in rows.items():
        actual = {**parameters, **passed_on}[name]
        if documented == "required":
            assert actual is inspect.Parameter.empty, name
        else:
            assert eval(documented.split("`")[1]) == actual, name


def test_the_documented_option_defaults_are_the_commands() -> None:
    """A ``[--option VALUE]`` in the operations table is the command's default."""
    import inspect

    from mds_core.streaming.loader_check import check_version

    checked, commands = 0, _mds_commands()
    for row in _operations_table():
        command = re.match(r"\| `mds ((?:versions )?[a-z-]+)", row)
        assert command, row
        name = command[1]
        params = {opt: p for p in commands[name].params for opt in p.opts}
        for option, value in re.findall(r"\[(--?[a-z-]+) (\d[\d.]*|[a-z0-9]+)\]", row):
            if value.isupper() or option not in params or value in ("N", "K", "T"):
                continue
            default = params[option].default
            assert not callable(default), (name, option)  # a documented default is a value, not a factory
            if default is None and name == "check-loader":  # --sample-rows and the like: check_version's own
                default = inspect.signature(check_version).parameters[option.strip("-").replace("-", "_")].default
            assert default is not None, (name, option, value)
            assert str(default) in (value, f"{value}.0") or default == type(default)(value), (name, option, value)
            checked += 1
    assert checked >= 12, checked
