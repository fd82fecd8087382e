"""``Stream``: one MDS dataset inside a ``StreamingDataset``, with its weight in the mix."""

from __future__ import annotations

import os
from typing import Any

from mds_core.errors import ConfigurationError
from mds_core.local import LocalDataset
from mds_core.order.mixing import StreamWeights

# Settings a Stream inherits from its StreamingDataset when left as None.
INHERITED = ("download_retry", "download_timeout", "validate_hash", "keep_zip")


class Stream:
    """A dataset directory (``local``, optionally copied from ``remote``) and how much of it an epoch takes.

    Arguments and checks follow ``streaming.Stream``; at most one of ``proportion`` (relative),
    ``repeat`` or ``choose`` (absolute) may be given.
    """

    def __init__(
        self,
        *,
        remote: str | None = None,
        local: str | None = None,
        split: str | None = None,
        proportion: float | None = None,
        repeat: float | None = None,
        choose: int | None = None,
        download_retry: int | None = None,
        download_timeout: float | None = None,
        validate_hash: str | None = None,
        keep_zip: bool | None = None,
    ) -> None:
        self.weights = StreamWeights(proportion=proportion, repeat=repeat, choose=choose)
        self.proportion, self.repeat, self.choose = proportion, repeat, choose
        if download_retry is not None and (not isinstance(download_retry, int) or download_retry < 0):
            raise ConfigurationError(f"download_retry must be an int >= 0, got {download_retry!r}")
        if download_timeout is not None and not download_timeout > 0:
            raise ConfigurationError(f"download_timeout must be > 0 seconds, got {download_timeout!r}")
        if local is None and remote is None:
            raise ConfigurationError("a Stream needs local= (a dataset directory) or remote=")
        if remote is not None and (local is None or os.fspath(remote) != os.fspath(local)):
            raise ConfigurationError(
                f"remote={remote!r}: downloading from a remote store is not supported yet; pass the local "
                "dataset directory as local="
            )
        self.remote, self.local, self.split = remote, os.fspath(local), split
        self.download_retry, self.download_timeout = download_retry, download_timeout
        self.validate_hash, self.keep_zip = validate_hash, keep_zip

    def apply_default(self, defaults: dict[str, Any]) -> None:
        """Take the dataset's value for every setting this stream left as None."""
        for name in INHERITED:
            if getattr(self, name) is None:
                setattr(self, name, defaults[name])

    def open(self, allow_unsafe_types: bool) -> LocalDataset:
        """The stream's samples, memory-mapped shard by shard."""
        return LocalDataset(self.local, self.split, allow_unsafe_types=allow_unsafe_types)

    def __repr__(self) -> str:
        return f"Stream(local={self.local!r}, split={self.split!r}, weights={self.weights})"
