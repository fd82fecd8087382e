"""One exception hierarchy for everything a user can get wrong.

Each class also derives from the builtin exception the reference raised in the same situation,
so code written against Mosaic Streaming that catches ``ValueError`` or ``TypeError`` keeps working.
Messages name the thing at fault (file, shard, column, sample, URL) and say what to do.
"""

from __future__ import annotations

from collections.abc import Iterator


def chain_of(err: BaseException) -> Iterator[BaseException]:
    """``err`` and what caused it (``__cause__``, else ``__context__``), each once, outermost first."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        yield cause
        cause = cause.__cause__ or cause.__context__


class MDSError(Exception):
    """Root of every error raised on purpose by mds_core."""


class InvalidIndexError(MDSError, ValueError):
    """An ``index.json`` that is not valid JSON, has the wrong version, or malformed shard entries."""


class UnsafePathError(InvalidIndexError):
    """A basename that is absolute or climbs out of the dataset directory with ``..``."""


class CorruptShardError(MDSError, ValueError):
    """A shard file whose bytes disagree with its header or its index entry."""


class HashMismatchError(CorruptShardError):
    """A shard file whose digest differs from the one recorded in the index."""


class UnknownEncodingError(MDSError, TypeError):
    """A column encoding name that is not in the registry or has a malformed configuration."""


class UnsafeEncodingError(MDSError, ValueError):
    """A ``pkl`` column read without ``allow_unsafe_types=True``."""


class EncodeError(MDSError, ValueError):
    """A value that cannot be stored with its column's encoding (wrong type, size or range)."""


class DecodeError(MDSError, ValueError):
    """Stored bytes that cannot be decoded with their column's encoding."""


class MissingColumnError(MDSError, KeyError):
    """A sample given to the writer lacks one of the writer's columns."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class CompressionError(MDSError, ValueError):
    """An unknown compression name or level, or data that does not decompress."""


class MissingDependencyError(MDSError, ImportError):
    """An optional package is needed; the message names the extra to install."""


class HashAlgorithmError(MDSError, ValueError):
    """An unknown hash algorithm, or a hash list that is not sorted and unique."""


class WriterError(MDSError, ValueError):
    """Invalid writer arguments or use of a finished writer."""


class OutputExistsError(WriterError, FileExistsError):
    """The writer's output directory already holds files and ``exist_ok`` is False."""


class ShardTooLargeError(WriterError):
    """A shard would pass 4 GiB, which its 32-bit offsets cannot address."""


class SizeError(MDSError, ValueError):
    """A size that is neither a byte count nor a string like ``"64mb"``."""


class SampleIndexError(MDSError, IndexError):
    """A sample index outside the dataset."""


class MergeError(MDSError, ValueError):
    """Index files that cannot be merged into one dataset."""


class ConfigurationError(MDSError, ValueError):
    """Dataset, order or world settings that cannot work together (the message says which and why)."""


class UnsafeFolderError(ConfigurationError):
    """A folder that must be this user's alone (the job root, a cache) but is not.

    Another user owns it or can write it, or it is a symbolic link: its contents cannot be trusted, nor may
    this user's data go there.
    """


class EmptyStreamError(ConfigurationError, RuntimeError):
    """A stream whose index lists no samples (the reference raised ``RuntimeError``)."""


class EpochMemoryError(MDSError, MemoryError):
    """An epoch's sample order that does not fit in memory.

    An index claiming far more samples than its shard files hold (the order is computed before any shard is opened), or
    data too large for this host.
    """


class ResumeError(MDSError, ValueError):
    """A state dict that cannot be resumed: malformed, or taken on different data or settings."""


class StorageError(MDSError, OSError):
    """A remote store or cache operation that failed for good (after retries); the message names the URL."""


class PlatformError(MDSError, OSError):
    """Streaming coordination (job directories, cross-process file locks) on a system without POSIX ``fcntl``."""


class StoreFileNotFoundError(StorageError, FileNotFoundError):
    """A file that is not in the store (or local directory); the reference raised ``FileNotFoundError``."""


class InvalidManifestError(MDSError, ValueError):
    """A shard-set manifest (``_versions/N.json``) or ``published.json`` that is not JSON or has bad fields."""


class VersionConflictError(MDSError, RuntimeError):
    """Another writer committed the same shard-set version first; nothing of this commit was published."""


class PartitionExistsError(MDSError, ValueError):
    """An append that writes shard-set partitions its base version has already (``mode="replace"`` replaces them)."""


class NothingToRollBackError(MDSError, LookupError):
    """A shard set with no earlier publication (still present) to roll back to."""


class ConversionError(MDSError, ValueError):
    """A table or DataFrame that cannot be converted to MDS: an unsupported type, a null, a bad column."""


class DeltaTableError(ConversionError):
    """A Delta table that cannot be read as asked: a bad version or timestamp, or data files gone; names the URI."""


class DeltaTableNotFoundError(DeltaTableError, FileNotFoundError):
    """No Delta table at the URI, or no such version of it (the message names both)."""


class UnsupportedDeltaFeatureError(DeltaTableError):
    """A Delta table whose protocol needs a reader feature deltalake cannot honour; names the feature and URI."""


class UnityCatalogError(DeltaTableError):
    """A Unity Catalog table name that cannot be read: bad syntax, not a Delta table; names the table."""


class UnityCatalogTableNotFoundError(UnityCatalogError, DeltaTableNotFoundError):
    """No such table or volume (or catalog, or schema) in Unity Catalog; names it and the workspace."""


class UnityCatalogPermissionError(UnityCatalogError, PermissionError):
    """Unity Catalog refused the caller (401, 403): names the table and the privilege or credential to fix."""


class UnityCatalogCredentialsExpiredError(UnityCatalogPermissionError):
    """The storage credentials Unity Catalog vended for a table expired before the read finished."""
