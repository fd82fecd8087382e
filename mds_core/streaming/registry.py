"""``streams_registry``: Stream classes by name, as in the reference, and how a dataset's streams are built.

``StreamingDataset(stream_name=..., stream_config=...)`` builds its single stream from this
registry, so a custom ``Stream`` subclass is used by registering it once::

    from mds_core import Stream, streams_registry

    class MyStream(Stream): ...

    streams_registry.register("my_stream", func=MyStream)
    StreamingDataset(remote=..., stream_name="my_stream", stream_config={...})

Installed packages can also offer streams through the entry point group ``mds_core.streams``.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, TypeVar, overload

from mds_core.errors import ConfigurationError
from mds_core.streaming.stream import Stream

ENTRY_POINT_GROUP = "mds_core.streams"
StreamFactory = Callable[..., Stream]
_Factory = TypeVar("_Factory", bound=StreamFactory)


class StreamRegistry:
    """Named stream factories (usually ``Stream`` subclasses): ``register``, ``get``, ``get_all``."""

    def __init__(self) -> None:
        self._factories: dict[str, StreamFactory] = {}

    @overload
    def register(self, name: str, *, func: _Factory) -> _Factory: ...

    @overload
    def register(self, name: str, *, func: None = None) -> Callable[[_Factory], _Factory]: ...

    def register(self, name: str, *, func: _Factory | None = None) -> _Factory | Callable[[_Factory], _Factory]:
        """Register ``func`` under ``name``; without ``func``, a decorator that registers what it decorates.

        Args:
            name: what ``StreamingDataset(stream_name=...)`` names it by.
            func: a ``Stream`` subclass or a function that builds one from keyword arguments.
        """
        if func is None:
            return lambda factory: self.register(name, func=factory)
        self._factories[name] = func
        return func

    def get(self, name: str) -> StreamFactory:
        """The stream factory registered as ``name``, else the one an installed entry point names.

        Args:
            name: the registered name.
        """
        if name in self._factories:
            return self._factories[name]
        for entry in entry_points(group=ENTRY_POINT_GROUP, name=name):
            factory: StreamFactory = entry.load()  # what the group's entry points name
            return self.register(name, func=factory)
        raise ConfigurationError(
            f"stream_name={name!r} is not registered (registered: {sorted(self._names())}); register your "
            f"Stream subclass with mds_core.streams_registry.register({name!r}, func=YourStream)"
        )

    def get_all(self) -> dict[str, StreamFactory]:
        """Every factory by name, entry points loaded (as the reference's registry does)."""
        found: dict[str, StreamFactory] = {
            entry.name: entry.load()
            for entry in entry_points(group=ENTRY_POINT_GROUP)
            if entry.name not in self._factories
        }
        return {**found, **self._factories}

    def _names(self) -> set[str]:
        """Every registered name, without loading the entry points'."""
        return set(self._factories) | {entry.name for entry in entry_points(group=ENTRY_POINT_GROUP)}


streams_registry = StreamRegistry()
streams_registry.register("stream", func=Stream)


def resolve_streams(
    streams: list[Stream] | None,
    remote: str | None,
    local: str | None,
    split: str | None,
    stream_name: str,
    stream_config: dict[str, Any] | None,
    version: int | None,
) -> list[Stream]:
    """The dataset's streams: the given list, or one built from the registry and the dataset's arguments."""
    if streams is not None:
        if remote is not None or local is not None:
            raise ConfigurationError("pass either streams=[...] or remote=/local=, not both")
        if version is not None:
            raise ConfigurationError(
                f"version={version} applies to remote=; with streams=[...] give each Stream its own version="
            )
        if not streams or not all(isinstance(s, Stream) for s in streams):
            raise ConfigurationError("streams must be a non-empty list of mds_core.Stream")
        return list(streams)
    if remote is None and local is None:
        raise ConfigurationError("pass streams=[...] or local= (a dataset directory)")
    config = dict(stream_config or {})
    if version is not None:
        config["version"] = version
    stream = streams_registry.get(stream_name)(remote=remote, local=local, split=split, **config)
    if not isinstance(stream, Stream):
        raise ConfigurationError(f"stream_name={stream_name!r} built a {type(stream).__name__}, not an mds_core.Stream")
    return [stream]


def apply_download_defaults(
    streams: list[Stream], download_retry: int, download_timeout: float, validate_hash: str | None, keep_zip: bool
) -> None:
    """The dataset's download settings, for every stream that leaves them unset."""
    defaults = {
        "download_retry": download_retry,
        "download_timeout": download_timeout,
        "validate_hash": validate_hash,
        "keep_zip": keep_zip,
    }
    for stream in streams:
        stream.apply_default(defaults)
