"""What the pages say about the code, checked against it: commands and options, examples of output and of
bytes, field lists, the layer picture. Each test is named in the annotation of the block it checks
(``<!-- checked by tests/docs/test_claims.py::... -->``) or in the page's source next to the claim."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.docs.blocks import ROOT, Block, all_blocks, blocks, pages


def _block(page: str, starts: str) -> Block:
    [found] = [block for block in blocks(page) if block.text.lstrip().startswith(starts)]
    return found


def _text(page: str) -> str:
    return (ROOT / page).read_text()


# ---------------------------------------------------------------------------------------------------------
# docs/format.md


FORMAT_COLUMNS = {"a": "int", "b": "bytes", "f32": "float32", "nd": "ndarray:int16:2,3", "s": "str"}
FORMAT_SAMPLE = {"a": 1, "b": b"x", "f32": 1.5, "nd": np.array([[1, 2, 3], [4, 5, 6]], np.int16), "s": "é"}


def _write_format_example(out: Path) -> dict:
    from mds_core import MDSWriter

    with MDSWriter(out=str(out), columns=FORMAT_COLUMNS, hashes=["sha1", "xxh3_64"]) as writer:
        for _ in range(3):
            writer.write(FORMAT_SAMPLE)
    return json.loads((out / "index.json").read_text())


def test_the_documented_sample_is_35_bytes_as_shown(tmp_path: Path) -> None:
    index = _write_format_example(tmp_path / "ds")
    shard = (tmp_path / "ds" / "shard.00000.mds").read_bytes()
    count = int.from_bytes(shard[:4], "little")
    offsets = np.frombuffer(shard[4 : 4 * (count + 2)], "<u4")
    sample = shard[offsets[0] : offsets[1]]
    block = _block("docs/format.md", "01000000 02000000")
    documented = "".join(
        "".join(re.findall(r"^[0-9a-f ]+?(?=\s{2,}|$)", line)[0].split()) for line in block.text.splitlines()
    )
    assert documented == sample.hex()
    assert len(sample) == 35 and "is 35 bytes:" in _text("docs/format.md")
    assert index["shards"][0]["samples"] == count == 3


def test_the_documented_index_is_the_writers(tmp_path: Path) -> None:
    """docs/format.md's index.json example: three copies of the sample above, written with two hashes."""
    index = _write_format_example(tmp_path / "ds")
    block = _block("docs/format.md", '{"shards": [{"column_encodings"')
    documented = json.loads(block.text)
    written_hashes = index["shards"][0]["raw_data"]["hashes"]
    for name, digest in documented["shards"][0]["raw_data"]["hashes"].items():
        assert written_hashes[name].startswith(digest.removesuffix("...")), name
        documented["shards"][0]["raw_data"]["hashes"][name] = written_hashes[name]
    assert documented == index


# ---------------------------------------------------------------------------------------------------------
# The mds command


def _mds_commands() -> dict[str, set[str]]:
    """Every ``mds`` command path ("inspect", "versions list") and its options."""
    import click

    from mds_core import cli

    found: dict[str, set[str]] = {}

    def walk(command: click.Command, path: str) -> None:
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, f"{path} {name}".strip())
        else:
            names = [o for p in command.params for o in [*p.opts, *getattr(p, "secondary_opts", [])]]
            found[path] = {name for name in names if name.startswith("-")}

    walk(cli.main, "")
    return found


MDS_USE = re.compile(r"(?:^|[`\s$(])mds ((?:[a-z][a-z-]*)(?: [a-z]+)?)((?:[^`\n]|\\\n)*)")


def _mds_uses() -> list[tuple[str, str, str]]:
    """``(where, command words, the rest)`` for every ``mds ...`` in the pages' code and code spans."""
    uses = []
    for page in pages():
        code = [(b.where, b.text) for b in blocks(page) if b.lang in ("bash", "console", "") or "mds " in b.text]
        spans = [(f"{page} (inline)", span) for span in re.findall(r"`([^`\n]*mds [^`\n]*)`", _text(page))]
        for where, text in code + spans:
            for line in re.split(r"\n(?!\s)", text):
                for match in MDS_USE.finditer(line):
                    uses.append((where, match[1], match[2]))
    return uses


def test_every_mds_command_and_option_the_docs_name_exists() -> None:
    commands = _mds_commands()
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
    text = _text("docs/operations.md")
    table = text[text.index("| command | what |") : text.index("PATH is a dataset directory")]
    rows = {}
    for row in table.strip().splitlines()[2:]:
        match = re.match(r"\| `mds ((?:versions )?[a-z-]+)([^`]*)`", row)
        assert match, row
        rows[match[1]] = set(re.findall(r"(--[a-z][a-z-]*|-n\b)", match[2]))
    commands = _mds_commands()
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
    text = _text("docs/operations.md")
    section = text[text.index("Measured in the training loop's process:") : text.index("Every figure covers")]
    tabled = re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE)
    assert tabled == [k for k in metrics if k not in ("workers", "totals")] + list(metrics["workers"][0])[1:]
    # "metrics-r<rank>-w<worker>.f64 (80 bytes each)"
    files = list((tmp_path / "jobs").rglob("metrics-r0-w0.f64"))
    from mds_core.streaming.telemetry import WORKER_FIELDS

    assert len(WORKER_FIELDS) * 8 == 80 and "`metrics-r<rank>-w<worker>.f64` (80 bytes each)" in text
    assert all(f.stat().st_size == 80 for f in files)


# ---------------------------------------------------------------------------------------------------------
# docs/architecture.md


def test_the_layer_picture_is_the_import_contract() -> None:
    import tomllib

    contract = next(
        c for c in tomllib.loads(_text("pyproject.toml"))["tool"]["importlinter"]["contracts"] if c["id"] == "layers"
    )
    picture = _block("docs/architecture.md", "pipelines")
    rows = [re.findall(r"\b(pipelines|mds_core\.\w+)", line) for line in picture.text.splitlines()]
    drawn = [sorted(set(row)) for row in rows if row]
    assert drawn == [sorted(layer.split(" | ")) for layer in contract["layers"]]


def test_no_block_is_left_out() -> None:
    """Every page's blocks are found (a fence the parser missed would escape every check)."""
    for page in pages():
        fences = len(re.findall(r"^\s*(```|~~~)", _text(page), re.MULTILINE))
        assert fences == 2 * len(blocks(page)), page
    assert len(all_blocks()) > 80


# ---------------------------------------------------------------------------------------------------------
# docs/operations.md, Soak test


def test_the_soak_is_as_described(tmp_path: Path) -> None:
    from mds_core import MDSWriter
    from tests.soak.report import Flatness
    from tests.soak.soak import COLUMNS, SoakConfig

    text = " ".join(_text("docs/operations.md").split())
    config, flat = SoakConfig(), Flatness()
    shards = tmp_path / "soak"
    with MDSWriter(out=str(shards), columns=COLUMNS, size_limit=config.shard_bytes) as writer:
        for i in range(config.samples):  # the soak's dataset, without its random payload (the sizes are the same)
            writer.write({"id": i, "payload": bytes(config.sample_bytes)})
    count = len(json.loads((shards / "index.json").read_text())["shards"])
    assert (config.samples, config.sample_bytes, count, config.shard_bytes) == (24_576, 1000, 96, 256 << 10)
    assert "(24,576 samples of 1,000 bytes in 96 shards of 256 KiB by default)" in text
    assert (config.fault_rate, config.delay_seconds) == (0.05, 0.5)
    assert "`--fault-rate` (0.05): a dropped connection, a 503, a 0.5 s delay or a body cut after 100 bytes" in text
    assert (config.ranks, config.workers, config.shuffle_algo, config.canonical_nodes) == (2, 4, "py1s", 4)
    assert (config.download_retry, config.cache_fraction, config.min_epochs, config.writer_interval) == (6, 0.3, 3, 2.0)
    assert (
        "* 2 rank processes (torchrun's environment variables, one node) with 4 persistent DataLoader workers" in text
    )
    assert '(`shuffle_algo="py1s"`, 4 canonical nodes) with `download_retry=6`' in text
    assert "`cache_limit` is 30% of the dataset" in text and "(at least `--min-epochs`, 3)" in text
    assert "a new version to the same root every 2 s" in text
    assert (flat.rss_rel, flat.rss_abs_kb, flat.fds_abs, flat.threads_abs, flat.tmp_files_abs) == (
        0.1,
        24 << 10,
        4,
        4,
        4,
    )
    assert "within 10% + 24 MiB of the first third's RSS, within 4 of its fds and of its threads" in text


# ---------------------------------------------------------------------------------------------------------
# docs/pipelines.md and docs/operations.md: the pipelines' settings


def test_the_pipelines_settings_are_as_described() -> None:
    import yaml

    from pipelines.assets.validated import ValidateConfig
    from pipelines.definitions import defs as load_defs

    defs = load_defs()
    from pipelines.operations import VacuumConfig
    from pipelines.resources import SmokeTestSettings, TrainingWorldSettings
    from pipelines.retries import RETRY

    pipelines_md = " ".join(_text("docs/pipelines.md").split())
    smoke = SmokeTestSettings()
    assert (smoke.num_workers, smoke.batch_size, smoke.sample_rows, smoke.sample_seconds) == (2, 256, 20_000, 30)
    assert "a `StreamingDataLoader` with 2 workers and batches of 256 (shuffled)" in pipelines_md
    assert "`sample_rows` (20,000) and `sample_seconds` (30 s)" in pipelines_md
    world = TrainingWorldSettings()
    table = {
        "MDS_SMOKE_MIN_ROWS_PER_SECOND": f"{smoke.min_rows_per_second:g}",
        "MDS_SMOKE_SAMPLE_ROWS": str(smoke.sample_rows),
        "MDS_SMOKE_SAMPLE_SECONDS": f"{smoke.sample_seconds:g}",
        "MDS_PLAN_WORLD": world.world,
        "MDS_PLAN_BATCH_SIZE": str(world.batch_size),
        "MDS_PLAN_EPOCHS": str(world.epochs),
        "MDS_PLAN_CONSUME_SECONDS": f"{float(world.consume_seconds):g}",
    }
    for variable, default in table.items():
        assert f"| `{variable}` | `{default}` |" in pipelines_md, variable
    assert (RETRY.max_retries, RETRY.delay) == (2, 20)
    assert "so steps retry twice, 20 s apart and then more" in pipelines_md
    assert ValidateConfig().max_quarantined_fraction == 0.01 and "(default 0.01, that is 1 %)" in pipelines_md
    assert VacuumConfig().grace_hours == 24 and "`grace_hours` (24)" in pipelines_md
    assert defs.resolve_sensor_def("digits_landing_sensor").minimum_interval_seconds == 60
    assert "watches `<landing>/<dataset>/` every 60 seconds" in pipelines_md
    assert defs.resolve_schedule_def("digits_daily_schedule").cron_schedule == "30 1 * * *"
    assert defs.resolve_schedule_def("digits_vacuum_schedule").cron_schedule == "0 3 * * 0"
    assert "`digits_daily_schedule` (01:30 UTC), `digits_vacuum_schedule` (Sundays 03:00 UTC)" in pipelines_md

    instance = yaml.safe_load(_text("pipelines/dagster.yaml"))
    assert instance["concurrency"]["runs"]["max_concurrent_runs"] == 2
    assert instance["concurrency"]["pools"]["default_limit"] == 1
    assert instance["run_monitoring"]["start_timeout_seconds"] == 300
    assert instance["retention"]["schedule"]["purge_after_days"] == 30
    assert instance["retention"]["sensor"]["purge_after_days"] == {"skipped": 7, "failure": 30, "success": -1}
    operations = " ".join(_text("docs/operations.md").split())
    assert (
        "at most two runs at once, one run at a time in the `shard_set_writer` pool, runs that do not start "
        "within 300 s marked failed, schedule ticks purged after 30 days, skipped sensor ticks after 7 and "
        "failed ones after 30" in operations
    )


def test_the_writer_arguments_table_has_the_writers_defaults() -> None:
    import inspect

    from mds_core import MDSWriter
    from mds_core.storage import output
    from mds_core.writer import mds_writer

    text = _text("docs/format.md")
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
    """A ``[--option VALUE]`` in the operations table, or ``--option`` "defaults to" / "(default N)", is the default."""
    import inspect

    import click

    from mds_core import cli
    from mds_core.streaming.loader_check import check_version

    def command(path: str) -> click.Command:
        found: click.Command = cli.main
        for word in path.split():
            found = found.commands[word]  # type: ignore[attr-defined]
        return found

    text = _text("docs/operations.md")
    table = text[text.index("| command | what |") : text.index("PATH is a dataset directory")]
    checked = 0
    for row in table.strip().splitlines()[2:]:
        name = re.match(r"\| `mds ((?:versions )?[a-z-]+)", row)[1]
        params = {opt: p for p in command(name).params for opt in p.opts}
        for option, value in re.findall(r"\[(--?[a-z-]+) (\d[\d.]*|[a-z0-9]+)\]", row):
            if value.isupper() or option not in params or value in ("N", "K", "T"):
                continue
            default = params[option].default
            if default is None and name == "check-loader":  # --sample-rows and the like: check_version's own
                default = inspect.signature(check_version).parameters[option.strip("-").replace("-", "_")].default
            assert default is not None, (name, option, value)
            assert str(default) in (value, f"{value}.0") or default == type(default)(value), (name, option, value)
            checked += 1
    assert checked >= 12, checked
    defaults = inspect.signature(check_version).parameters
    assert (defaults["sample_rows"].default, defaults["sample_seconds"].default) == (20_000, 30)
    assert "`sample_rows` (default 20,000 rows) and arrive within `sample_seconds` (default 30 s" in " ".join(
        text.split()
    )
