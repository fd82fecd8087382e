"""Fuzz target for hostile run config: what the Launchpad's ``resources:`` and ``ops:`` sections may set.

Each input builds ``ShardStore``, ``SparkResource`` and ``LandingZone`` from random nested config (keys
from a vocabulary of every refused name and fragment in varied case and separators, harmless fsspec
options, Spark settings in and out of the allow-list, unicode and very long strings; values of every
JSON type, nested, sometimes very deeply), with the deployment-only JSON fields set to nothing, their
variable's value, another value or an ``EnvVar`` of another variable, under an environment that sets
those variables to the same or other values (put back after each input); and checks a random
``schema_ref`` for a dataset. It calls what a run calls before opening anything (``options()``,
``settings()``, ``check_schema_ref``, then ``load_schema`` for an accepted reference), never
``session()``. Only ``MDSError`` escapes; construction refused by pydantic (``ValidationError``) or by
Dagster (its config errors, a ``CheckError`` for a null in a map, ``RecursionError`` for nesting past
~490 levels, all before any of the project's code runs) is a clean refusal; ``load_schema`` of a
declared module without that schema raises a ``ConfigurationError`` like any other refusal. Whatever is accepted agrees with the oracle
of ``run_config_words`` both ways (a key that is not all ASCII may also be refused); the planted module,
whose import leaves a marker file, is never imported (no marker, not in ``sys.modules``).
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path
from typing import Any

from mds_core.errors import MDSError
from tests.fuzz.harness import PropertyFailure
from tests.fuzz.mutate import weird_value
from tests.fuzz.run_config_words import (
    DECLARED,
    HARMLESS,
    MUST_REFUSE,
    OTHER,
    PLANTED,
    REFS,
    SPARK_MUST_REFUSE,
    VARIABLES,
    dangerous,
    dangerous_anywhere,
    spellings,
    with_deep_value,
)


class RunConfigTarget:
    """Hostile resource config and schema_ref -> the checks a run makes before opening anything."""

    name = "runconfig"

    def setup(self, workdir: str) -> None:
        import pipelines.resources  # noqa: F401  # Dagster and pydantic load here, not within an input's time limit
        from pipelines.registry import DatasetSpec
        from pipelines.run_config import REFUSED_OPTION_FRAGMENTS, REFUSED_OPTION_NAMES, RUN_CONFIG_SPARK_SETTINGS

        self.names, self.fragments = sorted(REFUSED_OPTION_NAMES), sorted(REFUSED_OPTION_FRAGMENTS)
        self.allowed = RUN_CONFIG_SPARK_SETTINGS
        missing = [n for n in MUST_REFUSE if not dangerous(n, self.names, self.fragments)]
        assert not missing and not self.allowed & set(SPARK_MUST_REFUSE), (missing, self.allowed & {*SPARK_MUST_REFUSE})
        self.marker = os.path.join(workdir, "planted-imported")
        os.makedirs(os.path.join(workdir, "modules"), exist_ok=True)
        planted = f"open({self.marker!r}, 'w').close()\nSCHEMA = None\n"  # its import leaves the marker
        for module, body in ((PLANTED, planted), (DECLARED, "SCHEMA = 1\n")):
            with open(os.path.join(workdir, "modules", f"{module}.py"), "w") as file:
                file.write(body)
        if os.path.join(workdir, "modules") not in sys.path:
            sys.path.append(os.path.join(workdir, "modules"))
        self.specs = [DatasetSpec(name="digits"), DatasetSpec(name="events", schema_ref=f"{DECLARED}:SCHEMA")]
        self.words = self.names + self.fragments + MUST_REFUSE + HARMLESS

    def _key(self, rng: random.Random) -> Any:
        if rng.random() < 0.05:
            return rng.choice((1, None, True, 2.5))  # YAML run config can give keys of other types
        return spellings(rng, rng.choice(self.words)) if rng.random() < 0.6 else rng.choice(HARMLESS)

    def _value(self, rng: random.Random, depth: int) -> Any:
        roll = rng.random()
        if depth < 4 and roll < 0.25:
            return {self._key(rng): self._value(rng, depth + 1) for _ in range(rng.randrange(4))}
        if depth < 4 and roll < 0.35:
            return [self._value(rng, depth + 1) for _ in range(rng.randrange(3))]
        return weird_value(rng) if roll < 0.8 else rng.choice(("8", "2g", "x" * 10_000, "http://127.0.0.1:9"))

    def _json(self, rng: random.Random) -> Any:
        roll = rng.random()
        if roll < 0.3:
            return ""
        if roll < 0.4:
            deep = ("[" * 100_000, '{"a": ' * 600 + "1" + "}" * 600)
            return rng.choice(('{"anon": false}', "[1]", "{", "null", '"x"', *deep))
        if roll < 0.45:
            return rng.choice((5, None, {"a": 1}))  # not a string: a ValidationError
        value = {self._key(rng): self._value(rng, 2) for _ in range(rng.randrange(3))}
        return json.dumps(value)

    def generate(self, rng: random.Random) -> dict[str, Any]:
        spark = {rng.choice(sorted(self.allowed)): self._value(rng, 3) for _ in range(rng.randrange(3))}
        if rng.random() < 0.5:
            spark[rng.choice(SPARK_MUST_REFUSE)] = "1"
        fields = {}
        for resource in VARIABLES:
            value = self._json(rng)
            variable, other = rng.choice((None, "same", "other", "empty")), rng.choice((None, "same", "other"))
            envvar = rng.choice((None, None, None, "own", OTHER))
            fields[resource] = {"value": value, "envvar": envvar, "variable": variable, "other": other}
        options: Any = {self._key(rng): self._value(rng, 1) for _ in range(rng.randrange(4))}
        if rng.random() < 0.05:
            options = rng.choice(([1], "x", None, {1: 2}))  # not a dict of str keys: a ValidationError
        ref = rng.choice(REFS)
        if rng.random() < 0.3:
            at = rng.randrange(len(ref) + 1)
            ref = ref[:at] + rng.choice(("", ":", ".", " ", PLANTED, "\x00", "é")) + ref[at + rng.randrange(2) :]
        # Now and then a value nested deeper than any real config (as run config may send it), built by check().
        deep = [rng.choice(("options", "spark")), rng.choice((50, 400, 480, 2000))] if rng.random() < 0.01 else None
        return {
            "options": options,
            "spark": spark,
            "fields": fields,
            "ref": ref,
            "spec": rng.randrange(2),
            "deep": deep,
        }

    def check(self, case: dict[str, Any]) -> None:
        if case["deep"] is not None:
            case = with_deep_value(case)
        saved = {name: os.environ.get(name) for name in [*VARIABLES.values(), OTHER]}
        try:
            for resource, field in case["fields"].items():
                self._environment(VARIABLES[resource], field)
            self._resources(case)
            self._schema_ref(case["ref"], self.specs[case["spec"]])
        finally:
            for name, value in saved.items():
                os.environ.pop(name, None) if value is None else os.environ.__setitem__(name, value)
            if os.path.exists(self.marker) or PLANTED in sys.modules:
                Path(self.marker).unlink(missing_ok=True)
                sys.modules.pop(PLANTED, None)
                raise PropertyFailure("planted module imported", f"schema_ref {case['ref']!r}")

    def _environment(self, variable: str, field: dict[str, Any]) -> None:
        value = field["value"] if isinstance(field["value"], str) else "{}"
        for name, how in ((variable, field["variable"]), (OTHER, field["other"])):
            if how is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = {"same": value, "other": '{"endpoint_url": "http://127.0.0.1:9"}', "empty": ""}[how]

    def _resources(self, case: dict[str, Any]) -> None:
        from dagster import DagsterError, EnvVar
        from dagster._check import CheckError
        from pydantic import ValidationError

        from pipelines.resources import LandingZone, ShardStore, SparkResource

        made: dict[str, Any] = {}  # resource name: the instance built from the run config
        fields: dict[str, Any] = {}
        run_config = {
            "ShardStore": {"storage_options": case["options"]},
            "SparkResource": {"spark_config": case["spark"]},
        }
        for kind in (ShardStore, SparkResource, LandingZone):
            resource, field = kind.__name__, case["fields"][kind.__name__]
            envvar = {None: None, "own": VARIABLES[resource], OTHER: OTHER}[field["envvar"]]
            fields[resource] = field["value"] if envvar is None else EnvVar(envvar)
            json_field = "spark_config_json" if kind is SparkResource else "storage_options_json"
            args = {json_field: fields[resource], **run_config.get(resource, {})}
            try:
                made[resource] = kind(**args)
            except (ValidationError, DagsterError, CheckError, RecursionError):
                # Refused at construction, by pydantic or Dagster, before any of the project's code runs:
                # Dagster's config checks, a null in a map (CheckError), nesting past ~490 levels (RecursionError).
                continue
        for resource, instance in made.items():
            use = instance.settings if resource == "SparkResource" else instance.options
            expected, lenient = self._oracle(resource, case, fields[resource])
            try:
                got: Any = use()
            except MDSError:
                got = None
            if repr(got) != repr(expected) and not (got is None and lenient):
                raise PropertyFailure(
                    f"{resource} {'accepted' if got is not None else 'refused'} against the oracle",
                    f"got {str(got)[:200]}, the oracle says {str(expected)[:200]}",
                )

    def _oracle(self, resource: str, case: dict[str, Any], field: Any) -> tuple[Any, bool]:
        """What ``resource`` must return (None: refused), and whether refusing is fine too."""
        from dagster import EnvVar

        variable = VARIABLES[resource]
        value = (os.environ.get(field.env_var_name) or "") if isinstance(field, EnvVar) else field
        if value and value != os.environ.get(variable):
            return None, False  # a deployment-only field with a value of the run's own
        try:
            extra = json.loads(value) if value else {}
        except (ValueError, RecursionError):
            return None, False
        if not isinstance(extra, dict):
            return None, False
        if resource == "SparkResource":
            if not set(case["spark"]) <= self.allowed:
                return None, False
            return {**{k: str(v) for k, v in case["spark"].items()}, **extra}, False
        if resource == "LandingZone":
            return extra, False
        found = dangerous_anywhere(case["options"], self.names, self.fragments)
        # None: only a key that is not all ASCII is in doubt, which no client would take: refusing it is fine too.
        return (None, False) if found else ({**case["options"], **extra}, found is None)

    def _schema_ref(self, ref: str, spec: Any) -> None:
        from pydantic import ValidationError

        from mds_core.errors import ConfigurationError
        from pipelines.assets.validated import ValidateConfig, check_schema_ref, load_schema

        try:
            ValidateConfig(schema_ref=ref)
        except ValidationError:
            return
        reference = ref or spec.schema_ref
        modules = {"pipelines.schemas", spec.schema_ref.partition(":")[0]}  # this project's, and the registry's
        allowed = reference == "not_null" or reference.partition(":")[0] in modules
        try:
            check_schema_ref(reference, spec)
            accepted = True
        except ConfigurationError:
            accepted = False
        if accepted != allowed:
            raise PropertyFailure(
                f"schema_ref {'accepted' if accepted else 'refused'} against the oracle", repr(reference)
            )
        if accepted and reference != "not_null":
            load_schema(reference, None, spec)  # type: ignore[arg-type]  # the frame is only for not_null
