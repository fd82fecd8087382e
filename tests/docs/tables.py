"""Tables the pages show that the code decides, rendered from the code. A page marks one with
``<!-- table: NAME (rendered by tests/docs/tables.py) -->`` ... ``<!-- end of table: NAME -->``, and
test_claims.py asserts the text between is ``TABLES[NAME]()`` (its message is the table to paste in)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields
from functools import partial

from tests.docs.blocks import ROOT

BEGIN = re.compile(r"^<!-- table: (?P<name>[\w-]+) .*-->$", re.MULTILINE)


def markdown(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(str(cell) for cell in line) + " |" for line in lines)


def shown_tables(page: str) -> dict[str, str]:
    """NAME -> the text between the page's markers of table NAME."""
    text = (ROOT / page).read_text()
    ends = {begin["name"]: text.index(f"<!-- end of table: {begin['name']} -->") for begin in BEGIN.finditer(text)}
    return {begin["name"]: text[begin.end() : ends[begin["name"]]].strip() for begin in BEGIN.finditer(text)}


def code(value: object) -> str:
    """A default as a page shows it: ``empty`` for an empty string, else the value in backticks."""
    return "empty" if value == "" else f"`{value:g}`" if isinstance(value, float) else f"`{value}`"


def prose(text: str) -> str:
    """A description for a Markdown cell: ``<placeholders>`` in backticks (bare, they read as HTML)."""
    return re.sub(r"[^\s(]*<[^>]*>[^\s;,)]*", lambda match: f"`{match[0]}`", text)


def pipeline_variables() -> str:
    """docs/pipelines.md: each resource field a variable sets, with its default and its description."""
    from pipelines.resources import RESOURCES
    from pipelines.settings import environment_variables

    rows = []
    for name, resource in RESOURCES.items():
        for field, variable in environment_variables(resource).items():
            info = resource.model_fields[field]
            what = prose(str(info.description).removesuffix(f" (${variable})"))
            rows.append((f"`{variable}`", f"`{name}.{field}`", code(info.default), what))
    return markdown(("variable", "resource field", "default", "what"), rows)


def smoke_settings() -> str:
    """docs/pipelines.md: the smoke test's settings (the ``smoke_settings`` resource)."""
    from pipelines.resources import SmokeTestSettings
    from pipelines.settings import environment_variables

    variables = environment_variables(SmokeTestSettings)
    rows = [
        (f"`{field}`", code(info.default), f"`{variables[field]}`" if field in variables else "")
        for field, info in SmokeTestSettings.model_fields.items()
    ]
    return markdown(("field", "default", "variable"), rows)


def pipeline_defaults() -> str:
    """docs/pipelines.md: the run config defaults, the retry policy and the digits dataset's automation."""
    from pipelines.assets.validated import ValidateConfig
    from pipelines.definitions import defs
    from pipelines.operations import VacuumConfig
    from pipelines.retries import RETRY

    loaded = defs()
    rows = [
        ("`validated_table`'s `max_quarantined_fraction`", code(ValidateConfig().max_quarantined_fraction)),
        ("`<dataset>_vacuum`'s `grace_hours`", code(VacuumConfig().grace_hours)),
        (
            "retries of a step (`pipelines/retries.py`)",
            f"{RETRY.max_retries}, {RETRY.delay} s apart and then more ({getattr(RETRY.backoff, 'name', 'no').lower()} backoff"
            f"{' with jitter' if RETRY.jitter else ''})",
        ),
        (
            "`digits_landing_sensor` looks every",
            f"{loaded.resolve_sensor_def('digits_landing_sensor').minimum_interval_seconds} s",
        ),
    ]
    for schedule in ("digits_daily_schedule", "digits_vacuum_schedule"):
        rows.append((f"`{schedule}` (cron, UTC)", code(loaded.resolve_schedule_def(schedule).cron_schedule)))
    return markdown(("setting", "default"), rows)


def soak_options() -> str:
    """docs/operations.md: the soak test's options (``SoakConfig``) and their defaults, in two columns."""
    from tests.soak.soak import SoakConfig

    options = [(f"`--{f.name.replace('_', '-')}`", code(f.default)) for f in fields(SoakConfig)]
    half = (len(options) + 1) // 2
    rows = [(*options[i], *(options[i + half] if i + half < len(options) else ("", ""))) for i in range(half)]
    return markdown(("option", "default", "option", "default"), rows)


def soak_flatness() -> str:
    """docs/operations.md: how much each process's figures may grow over a soak run (``Flatness``)."""
    from tests.soak.report import Flatness

    flat = Flatness()
    rows = [
        ("RSS", f"{flat.rss_rel:.0%} of it + {flat.rss_abs_kb >> 10} MiB"),
        ("open file descriptors", f"{flat.fds_abs:g}"),
        ("threads", f"{flat.threads_abs:g}"),
        ("files under `TMPDIR`", f"{flat.tmp_files_abs:g}"),
    ]
    return markdown(("figure", "last third's mean over the first third's, at most"), rows)


def canonical_nodes_defaults() -> str:
    """docs/ordering.md: what ``num_canonical_nodes=None`` becomes, per shuffle, for ``P`` nodes."""
    from mds_core.order.shuffle import SHUFFLE_ALGOS
    from mds_core.order.spec import OrderSpec

    per_node = {algo: OrderSpec([[10]], shuffle_algo=algo).canonical_nodes(2) // 2 for algo in SHUFFLE_ALGOS}
    rows = [(f"`{algo}`", "`P`" if n == 1 else f"`{n}·P`") for algo, n in per_node.items()]
    return markdown(("`shuffle_algo`", "`num_canonical_nodes=None` becomes"), rows)


def block_size_defaults() -> str:
    """docs/ordering.md: what ``shuffle_block_size=None`` becomes for ``C`` canonical nodes."""
    from mds_core.order.spec import OrderSpec

    sizes = [(f"{c:,}", f"{OrderSpec([[10]], num_canonical_nodes=c).block_size(1):,}") for c in (1, 2, 4, 8, 16, 64)]
    return markdown(("`C`", "`shuffle_block_size=None` becomes"), sizes)


def elastic_batches() -> str:
    """docs/ordering.md, Elasticity: the worked example's global batches, the same on every world."""
    import warnings

    from mds_core.order.spec import OrderSpec
    from mds_core.order.traversal import traversal_order
    from mds_core.order.work import generate_work

    shards, algo, canonical, seed, block, global_batch = [3, 5, 2, 4, 6], "py1e", 2, 7, 6, 4
    order_spec = partial(OrderSpec, [shards], shuffle=True, shuffle_algo=algo, shuffle_seed=seed)
    rows = []
    for nodes, ranks, workers, batch in ((1, 2, 1, 2), (2, 1, 2, 2), (1, 4, 1, 1), (1, 1, 1, 4)):
        assert nodes * ranks * batch == global_batch
        spec = order_spec(num_canonical_nodes=canonical, shuffle_block_size=block, batch_size=batch)
        with warnings.catch_warnings():  # py1e warns that the block is narrower than some shards
            warnings.simplefilter("ignore")
            order = [int(i) for i in traversal_order(generate_work(spec, nodes, ranks, workers, 0, 0)) if i >= 0]
        batches = [sorted(order[i : i + global_batch]) for i in range(0, len(order), global_batch)]
        shown = " ".join("`{" + ",".join(map(str, b)) + "}`" for b in batches)
        rows.append((f"`({nodes},{ranks},{workers},{batch})`", shown))
    caption = (
        f"Shards of {', '.join(map(str, shards))} samples, `C={canonical}`, `{algo}`, `seed={seed}`, "
        f"epoch 0, `S={block}`, `G={global_batch}`:\n\n"
    )
    return caption + markdown(("`(P,R,W,B)`", "global batches (each one's samples, sorted)"), rows)


RENDERERS = [pipeline_variables, smoke_settings, pipeline_defaults, soak_options, soak_flatness]
RENDERERS += [canonical_nodes_defaults, block_size_defaults, elastic_batches]
TABLES: dict[str, Callable[[], str]] = {render.__name__.replace("_", "-"): render for render in RENDERERS}
