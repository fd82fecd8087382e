"""The store registry: everything the library knows about each kind of store, in one entry per kind.

An entry (``StoreKind``) holds the URL schemes that name the store, the package it needs and the extra
that installs it, the function that opens its fsspec filesystem, how (and whether) it makes a create
exclusive, and what the first component of its paths is. ``RemoteStore`` (``remote.py``), exclusive
creates (``exclusive.py``), the pipelines' landing zone and warehouse, and the docs' table of stores
(``docs/remote-storage.md``, checked by ``tests/storage/test_registry.py``) all read it.

Adding a store is one entry in ``STORES``, plus a small module with its set-up if fsspec's defaults
are not enough (``s3.py``, ``gcs.py``, ``azure.py`` and ``volumes.py`` are those of the stores here).
A set-up module imports its client library inside its functions: this module is imported with
``mds_core``, and a store's package is optional.

Every filesystem is opened with fsspec's listing cache off: another process commits, publishes and
vacuums between two calls, and a stale listing would name files that are gone or miss new ones.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from urllib.parse import urlparse

from mds_core.errors import ConfigurationError, MissingDependencyError
from mds_core.storage import azure, gcs, s3, s3_reads
from mds_core.storage.files import create_exclusive
from mds_core.storage.urls import is_remote, local_path

# (url, timeout in seconds or None, fsspec options) -> (fsspec filesystem, the url's path inside it)
FilesystemFactory = Callable[[str, float | None, dict[str, Any]], tuple[Any, str]]
# (filesystem, path, bytes) -> True if this call created the file, False if it already existed
CreateIfAbsent = Callable[[Any, str, bytes], bool]
# (async filesystem) -> its coroutine function (remote path, local path) that downloads one file
AsyncGetFile = Callable[[Any], Callable[[str, str], Any]]
# (async filesystem) -> its coroutine function (path, begin, end) that reads exactly those bytes in one request
AsyncReadRange = Callable[[Any], Callable[[str, int, int], Any]]
# (timeout, storage options, the reader inherited at a fork or None) -> a blocking reader of whole files and byte
# ranges (``open(path, "rb")``, ``cat_file(path)``, ``read_range(path, begin, end)``), or None: read with the filesystem
Reader = Callable[[float | None, dict[str, Any], Any], Any]
# (filesystem inherited at a fork) -> options for the child's own filesystem, taken from it
ReopenOptions = Callable[[Any], dict[str, Any]]
# (a failed call's exception) -> what to set, for a failure no retry can fix (no credentials); else None
Advice = Callable[[BaseException], str | None]


@dataclass(frozen=True)
class ExclusiveCreate:
    """How a store creates a file only if it does not exist: ``how`` for the docs, ``create`` does it."""

    how: str
    create: CreateIfAbsent


@dataclass(frozen=True)
class StoreKind:
    """One kind of store: every scheme that names it and everything the library does differently for it.

    ``bucket`` names what the first path component is where it must exist before anything can be
    listed or written (``"bucket"``, ``"container"``), else None. ``exclusive_create`` is None for a
    store that cannot promise one: versioned shard sets refuse it. ``get_file`` picks the coroutine
    that downloads a file where the filesystem's own ``_get_file`` sends more than the one GET a
    download needs, or sleeps in a retry loop of its own; None: ``_get_file``. ``read_range`` picks the
    coroutine that reads part of a file in one request and refuses an answer of another length unread
    (a store that ignores ``Range`` sends the whole file); None: the store's files are only read whole
    (``RemoteStore.reads_ranges``). ``reopen_options``
    gives what a forked child's new filesystem may take over from the one it inherited (an S3
    session: credentials and parsed API models, no connections), so a DataLoader worker does not
    build it again; None: nothing. ``reader`` opens a client that reads whole files and byte ranges without the
    filesystem's library (S3: botocore alone, ``s3_reads``); its ``open`` returns when the store answers; None: the
    filesystem reads. ``advice`` recognises a failure that no retry can fix (no
    credentials) and says what to set; None: every failure is retried.
    ``whole_read`` are the ``cat_file`` arguments that read a whole file in one request (s3fs otherwise asks
    for its size first, a HEAD, to split the read). ``path`` gives a URL's path inside the filesystem without
    opening it: a store that has one builds its client on first use, so a pinned version whose index and
    shards are cached imports no client library and builds no client (s3fs: about 0.3 s); None: opened when
    the store is made, so that a client that connects when made (ftp, sftp) fails there, naming the URL.
    ``answers_on_open``: the filesystem's ``open`` returns when the store answers a download's request, so a
    blocking client's late first byte is seen (``first_byte``); async stores see it from their progress callback.
    """

    name: str
    schemes: tuple[str, ...]
    filesystem: FilesystemFactory
    exclusive_create: ExclusiveCreate | None
    bucket: str | None = None
    package: str | None = None
    extra: str | None = None
    get_file: AsyncGetFile | None = None
    read_range: AsyncReadRange | None = None
    reopen_options: ReopenOptions | None = None
    reader: Reader | None = None
    advice: Advice | None = None
    whole_read: Mapping[str, Any] = field(default_factory=dict)
    path: Callable[[str], str] | None = None
    answers_on_open: bool = False

    def open(self, url: str, timeout: float | None, options: Mapping[str, Any]) -> tuple[Any, str]:
        """(fsspec filesystem, path inside it) for ``url``, with fsspec's listing cache off."""
        self.require_installed(url)
        return self.filesystem(url, timeout, {"use_listings_cache": False, **options})

    def advice_for(self, err: BaseException) -> str | None:
        """What to set to fix ``err`` when retrying cannot (``advice``), else None."""
        return None if self.advice is None else self.advice(err)

    def unopened_path(self, url: str) -> str | None:
        """``url``'s path inside the filesystem, by ``path``, once the store's package is found (not imported).

        None for a kind without ``path``: its filesystem must be opened to know the path.
        """
        if self.path is None:
            return None
        self.require_installed(url, imported=False)
        return self.path(url)

    def require_installed(self, url: str, imported: bool = True) -> None:
        """``MissingDependencyError`` naming the extra when the store's package is not installed.

        Args:
            url: the store's URL, for the message.
            imported: import the package (an installation that fails to import counts as missing);
                False: only find it, which imports nothing (a store opened on first use checks early).
        """
        if self.package is None:
            return
        try:
            if imported:
                importlib.import_module(self.package)
            elif importlib.util.find_spec(self.package) is None:
                raise ImportError(self.package)
        except ImportError:
            scheme = urlparse(url).scheme
            raise MissingDependencyError(
                f"{url}: the {scheme}:// backend needs the {self.package!r} package: "
                f"pip install 'mds-pipelines[{self.extra}]'"
            ) from None


# -------------------------------------------------------------------------------------------------
# set-up small enough to live beside the registry


def _local_filesystem(url: str, timeout: float | None, options: dict[str, Any]) -> tuple[Any, str]:
    import fsspec

    return fsspec.filesystem("file"), os.path.abspath(local_path(url))


def _fsspec_filesystem(url: str, timeout: float | None, options: dict[str, Any]) -> tuple[Any, str]:
    """The fsspec filesystem for the URL, with the options as given (and no listing cache)."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(url, **options)
    return fs, path


def _volumes_filesystem(url: str, timeout: float | None, options: dict[str, Any]) -> tuple[Any, str]:
    # Imported here, not above: VolumesFileSystem subclasses fsspec's, and fsspec is optional.
    from mds_core.storage import volumes

    return volumes.volumes(url, timeout, options)


def _create_local(fs: Any, path: str, data: bytes) -> bool:
    return create_exclusive(path, data)


def _create_with_precondition(fs: Any, path: str, data: bytes) -> bool:
    """Create ``path`` with ``data`` unless it exists, by the store's own precondition; whether it was created.

    For ``mode="create"`` gcsfs sends ``ifGenerationMatch=0``, adlfs ``overwrite=False`` (If-None-Match: *) and
    ``VolumesFileSystem`` a Files API upload with ``overwrite=false``; each turns the store's refusal (412, 409
    BlobAlreadyExists, 409 Conflict) into FileExistsError.
    """
    try:
        fs.pipe_file(path, data, mode="create")
        return True
    except FileExistsError:
        return False


# -------------------------------------------------------------------------------------------------
# the registry

STORES: Mapping[str, StoreKind] = MappingProxyType(
    {
        "local": StoreKind(
            name="local disk",
            schemes=("file",),
            filesystem=_local_filesystem,
            exclusive_create=ExclusiveCreate(
                "hard link of a complete temporary file; an exclusive open (`O_CREAT`, `O_EXCL`) where links "
                "are refused (the `/Volumes` FUSE mount)",
                _create_local,
            ),
        ),
        "s3": StoreKind(
            name="Amazon S3 and S3-compatible stores",
            schemes=("s3", "s3a"),
            filesystem=s3.filesystem,
            exclusive_create=ExclusiveCreate("conditional PUT, `If-None-Match: *` (412: lost)", s3.create_if_absent),
            bucket="bucket",
            package="s3fs",
            extra="s3",
            reopen_options=s3.reopen_options,
            advice=s3.credentials_advice,
            path=s3.path_of,
            get_file=s3.get_file,
            read_range=s3.read_range,
            reader=s3_reads.reader,
            whole_read={"max_concurrency": 1},
        ),
        "gcs": StoreKind(
            name="Google Cloud Storage",
            schemes=("gs", "gcs"),
            filesystem=gcs.filesystem,
            exclusive_create=ExclusiveCreate(
                "upload with `ifGenerationMatch=0` (412: lost)", _create_with_precondition
            ),
            bucket="bucket",
            package="gcsfs",
            extra="gcs",
            get_file=gcs.get_file,
        ),
        "azure": StoreKind(
            name="Azure Blob Storage / ADLS",
            schemes=("az", "abfs", "abfss"),
            filesystem=azure.filesystem,
            exclusive_create=ExclusiveCreate(
                "Put Blob with `If-None-Match: *` (409 `BlobAlreadyExists`: lost)", _create_with_precondition
            ),
            bucket="container",
            package="adlfs",
            extra="azure",
        ),
        "hf": StoreKind(
            name="Hugging Face Hub",
            schemes=("hf",),
            filesystem=_fsspec_filesystem,
            exclusive_create=None,
            package="huggingface_hub",
            extra="hf",
        ),
        "volumes": StoreKind(
            name="Databricks Unity Catalog volumes",
            schemes=("dbfs",),
            filesystem=_volumes_filesystem,
            exclusive_create=ExclusiveCreate(
                "Files API upload with `overwrite=false` (409: lost)", _create_with_precondition
            ),
            package="databricks.sdk",
            extra="databricks",
            answers_on_open=True,  # the Files API client sends its GET in open, streaming the body after
        ),
    }
)


# -------------------------------------------------------------------------------------------------
# finding a URL's store


def kind_of_scheme(scheme: str) -> StoreKind | None:
    """The registry's entry for ``scheme`` (``file`` for local paths), or None."""
    return next((kind for kind in STORES.values() if scheme in kind.schemes), None)


def remote_schemes() -> list[str]:
    """Every scheme of the registry that names a remote store, sorted."""
    return sorted(scheme for kind in STORES.values() for scheme in kind.schemes if scheme != "file")


def store_kind(url: str, *, any_fsspec: bool = False) -> StoreKind:
    """The kind of store ``url`` is on: a local path or ``file://`` is ``STORES["local"]``.

    A scheme the registry does not know is a ``ConfigurationError`` listing the ones it does, unless
    ``any_fsspec``: then it is ``FSSPEC_FALLBACK``, whatever fsspec itself makes of it.
    """
    if not is_remote(url):
        return STORES["local"]
    scheme = urlparse(url).scheme
    kind = kind_of_scheme(scheme)
    if kind is not None:
        return kind
    if any_fsspec:
        return FSSPEC_FALLBACK
    raise ConfigurationError(
        f"{url}: unsupported URL scheme {scheme!r}; use a local path, file://, "
        + ", ".join(f"{s}://" for s in remote_schemes())
    )


def fsspec_fallback(url: str, timeout: float | None, options: dict[str, Any]) -> tuple[Any, str]:
    """The fsspec filesystem for a scheme the registry does not know (``memory://``, ``sftp://``...).

    It gets none of a registered store's set-up: its client retries and timeouts are fsspec's. A fresh
    instance each time, so a long-lived process never reads a listing an earlier call cached.
    """
    import fsspec

    scheme = urlparse(url).scheme
    try:
        fsspec.get_filesystem_class(scheme)
    except ValueError:
        raise ConfigurationError(
            f"{url}: unsupported URL scheme {scheme!r}: neither a store of mds_core ("
            + ", ".join(f"{s}://" for s in remote_schemes())
            + ") nor a protocol fsspec knows; use one of those or a local path"
        ) from None
    except ImportError as err:
        raise MissingDependencyError(f"{url}: fsspec's {scheme}:// filesystem needs a package: {err}") from None
    fs, path = fsspec.core.url_to_fs(url, skip_instance_cache=True, **options)
    return fs, path


# A scheme fsspec knows and the registry does not; only for callers that ask (``any_fsspec=True``).
FSSPEC_FALLBACK = StoreKind(
    name="any other fsspec protocol", schemes=(), filesystem=fsspec_fallback, exclusive_create=None
)
