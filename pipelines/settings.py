"""Where a resource setting comes from: its field's one default, its environment variable, or run config.

A field may name an environment variable (``env_field``); when the code location loads,
``bound_to_environment`` binds each field whose variable is set to ``EnvVar(name)``, so Dagster resolves the
value when a run starts and the UI shows the variable's name, never its value.

Run config (the Launchpad's ``resources:`` section) can replace any field, an EnvVar-bound one too: with a
literal, or with ``{env: OTHER_VARIABLE}``. So a binding proves nothing about where a value came from, and
the fields that can carry credentials, endpoints or JVM options are *deployment-only*
(``env_field(..., deployment_only=True)``): ``deployment_value`` honours them only when their value is
their variable's value in the run's own environment. The dictionaries a run may set are checked by the
rules of ``pipelines.run_config``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, TypeVar

from dagster import ConfigurableResource, EnvVar
from pydantic import Field

from mds_core.errors import ConfigurationError

R = TypeVar("R", bound=ConfigurableResource[Any])


def env_field(default: Any, env: str, description: str, *, deployment_only: bool = False, **limits: Any) -> Any:
    """A field with its one default, whose value the named variable sets when it is set (``bound_to_environment``).

    ``deployment_only``: a setting that can carry credentials, endpoints or JVM options, honoured only
    when its value is the variable's (``deployment_value``), never a value of run config's own.
    """
    extra: dict[str, Any] = {"env": env, "deployment_only": deployment_only}
    return Field(default=default, description=f"{description} (${env})", json_schema_extra=extra, **limits)


def _field_extras(resource: type[ConfigurableResource[Any]]) -> dict[str, dict[str, Any]]:
    named = {name: (info.json_schema_extra or {}) for name, info in resource.model_fields.items()}
    return {name: extra for name, extra in named.items() if isinstance(extra, dict) and "env" in extra}


def environment_variables(resource: type[ConfigurableResource[Any]]) -> dict[str, str]:
    """Field name -> the environment variable that sets it, for the fields that name one."""
    return {name: str(extra["env"]) for name, extra in _field_extras(resource).items()}


def deployment_only_fields(resource: type[ConfigurableResource[Any]]) -> dict[str, str]:
    """Field name -> its variable, for the fields that only the deployment's environment sets."""
    return {name: str(extra["env"]) for name, extra in _field_extras(resource).items() if extra["deployment_only"]}


def bound_to_environment(resource: type[R], environ: Mapping[str, str]) -> R:
    """``resource`` with each field whose variable is set in ``environ`` bound to ``EnvVar``.

    Dagster reads the value when a run starts, and the UI shows the variable's name. The others keep their field's
    default.
    """
    bound: dict[str, Any] = {}
    for field, variable in environment_variables(resource).items():
        if variable in environ:
            integer = resource.model_fields[field].annotation in (int, "int")
            bound[field] = EnvVar.int(variable) if integer else EnvVar(variable)
    return resource(**bound)


def resolved(value: str) -> str:
    """A field's value: an ``EnvVar`` left unresolved (a resource used outside a run) is read here."""
    return (value.get_value() or "") if isinstance(value, EnvVar) else value


def deployment_value(resource: ConfigurableResource[Any], field: str) -> str:
    """A deployment-only field's value, refused unless it is its variable's value in this process's environment.

    That is the run's environment: a run worker inherits the code server's. Empty is always fine.
    """
    variable = deployment_only_fields(type(resource))[field]
    value = resolved(getattr(resource, field))
    if value and value != os.environ.get(variable):
        raise ConfigurationError(
            f"{type(resource).__name__}.{field} can carry credentials, endpoints and JVM options: only the "
            f"deployment's ${variable} sets it; run config may not (this run's value is not ${variable}'s). Remove "
            f"it from the run config, or set ${variable} where the code server and its runs start"
        )
    return value


def deployment_json(resource: ConfigurableResource[Any], field: str) -> dict[str, Any]:
    """A deployment-only JSON field as a dict, checked by ``deployment_value`` first."""
    return json_object(deployment_value(resource, field), deployment_only_fields(type(resource))[field])


def json_object(text: str, variable: str) -> dict[str, Any]:
    """``text`` (``$variable``'s value) as a JSON object; empty is ``{}``. Errors never echo the text."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as err:  # RecursionError: absurdly deep nesting
        raise ConfigurationError(
            f"${variable} is not valid JSON ({err.__class__.__name__} at {err}); give a JSON "
            'object such as {"key": "value"}'
        ) from None  # never echo a secret
    if not isinstance(value, dict):
        raise ConfigurationError(f"${variable} must be a JSON object, got a {type(value).__name__}")
    return value
