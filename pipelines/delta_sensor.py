"""A sensor on a Delta source: a run for each day a new table version changed, for datasets of ``kind: delta``.

It takes the landing sensor's place for such datasets. Each tick lists the table's log once
(``latest_delta_version``); on a version newer than the cursor (else the version the shard set recorded), it plans
the increment (``plan_increment``) and requests one run per day the new commits touched, every run pinned to the
table version planned:

* ``append``: the days of the added files' day partition;
* ``replace_partitions``: the days of the touched partitions;
* ``rebuild`` (a schema or protocol change, a delete on a table not partitioned by day): every published day;
* ``none`` (``OPTIMIZE``, compaction): no run; the cursor moves on.

Where the day column is not a partition column, an appended file's day comes from its statistics (one day: min =
max), and a delete's or an update's days from the Change Data Feed's rows (``delta.enableChangeDataFeed``);
where neither says, every published day is converted again. The runs' tags record the plan's mode, versions and reason.
"""

# No `from __future__ import annotations`: Dagster reads the resource annotations at runtime.
from dagster import RunRequest, SensorDefinition, SensorEvaluationContext, SensorResult, SkipReason, sensor

from mds_core.convert.delta_changes import IncrementalPlan, plan_increment
from mds_core.convert.delta_log import latest_delta_version
from mds_core.storage.urls import redact
from mds_core.versions.source_lineage import recorded_table_version
from pipelines.automation import daily_job_name, published_days
from pipelines.conventions import daily, op_name, sensor_status
from pipelines.delta_source import table_location
from pipelines.registry import DatasetSpec
from pipelines.resources import ShardStore


def delta_sensor(spec: DatasetSpec, running: bool = False) -> SensorDefinition:
    """The sensor that converts the days each new version of ``spec``'s Delta table changed.

    Args:
        spec: a dataset whose source is ``kind: delta``.
        running: start running (else stopped until turned on).
    """

    @sensor(
        name=f"{spec.name}_delta_sensor",
        job_name=daily_job_name(spec),
        minimum_interval_seconds=60,
        default_status=sensor_status(running),
        description=f"Watches the Delta table {redact(spec.source.path)} and converts the days each new table "
        "version changed (appends, deletes, updates); OPTIMIZE starts no run.",
    )
    def watch_delta(context: SensorEvaluationContext, shard_store: ShardStore) -> SensorResult:
        return delta_requests(context, spec, shard_store)

    return watch_delta


def delta_requests(context: SensorEvaluationContext, spec: DatasetSpec, shard_store: ShardStore) -> SensorResult:
    """The runs for the table versions after the cursor; the cursor becomes the latest version acted on.

    Args:
        context: the sensor's context (its cursor: the last table version acted on).
        spec: the dataset.
        shard_store: where its shard set is (for the recorded table version and the published days).
    """
    uri, options, _ = table_location(spec.source.path)
    latest = latest_delta_version(uri, options)
    since = int(context.cursor) if context.cursor else recorded_table_version(shard_store.shard_set(spec.name))
    if since is None:
        return SensorResult(
            skip_reason=SkipReason(
                f"{spec.name}'s shard set records no version of {redact(spec.source.path)}: "
                "convert its days once (a backfill), then the sensor follows the table"
            )
        )
    if latest <= since:
        return SensorResult(skip_reason=SkipReason(f"no table version after {since}"), cursor=str(since))
    plan = plan_increment(uri, since, latest, by=spec.source.day_column or None, storage_options=options)
    days = plan_days(plan, spec, published_days(shard_store, spec))
    context.log.info(f"{spec.name}: table versions {since + 1}..{latest}: {plan.mode} ({plan.reason}); days {days}")
    if not days:
        return SensorResult(skip_reason=SkipReason(f"{plan.reason}: no day to convert"), cursor=str(latest))
    return SensorResult(run_requests=[_request(spec, plan, day) for day in days], cursor=str(latest))


def plan_days(plan: IncrementalPlan, spec: DatasetSpec, published: set[str]) -> list[str]:
    """The partition days ``plan`` changes, sorted (days outside the dataset's partitions left out).

    Args:
        plan: the increment.
        spec: the dataset (its day column and partitions).
        published: the published version's days, for a rebuild or a change whose days nothing says.
    """
    column = spec.source.day_column
    if plan.mode == "none":
        return []
    changed = [f.by_value for f in plan.added_files] + [p.get(column) for p in plan.touched_partitions]
    days = set(published) if plan.mode == "rebuild" or None in changed else {str(day) for day in changed}
    return sorted(days & set(daily(spec).get_partition_keys()))


def _request(spec: DatasetSpec, plan: IncrementalPlan, day: str) -> RunRequest:
    """One day's run, reading the table at the planned version."""
    raw = {"config": {"version": plan.to_version}}
    return RunRequest(
        run_key=f"{day}:v{plan.to_version}",
        partition_key=day,
        run_config={"ops": {op_name(spec, "raw_table"): raw}},
        tags={
            "dataset": spec.name,
            "mds/delta_mode": plan.mode,
            "mds/delta_versions": f"{plan.from_version + 1}..{plan.to_version}",
            "mds/delta_reason": plan.reason[:255],  # a tag's value is short
        },
    )
