"""Retry policies: retry what a retry can fix (a lost executor, a store's hiccup), never a bad input.

Every step is safe to rerun: a day's tables are replaced, a shard-set commit is a new version built
on the last published one, publication rewrites one pointer, and a check only reads. Failures that
a retry cannot fix (a bad schema, a missing column, a repeated day) are raised as ``Failure`` with
``allow_retries=False`` so the run fails at once with the message.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from dagster import Backoff, Failure, Jitter, RetryPolicy

from mds_core.errors import ConfigurationError, MDSError, StorageError, VersionConflictError

RETRY = RetryPolicy(max_retries=2, delay=20, backoff=Backoff.EXPONENTIAL, jitter=Jitter.PLUS_MINUS)


@contextmanager
def failures_are_final() -> Iterator[None]:
    """Turn input and configuration errors into a ``Failure`` that Dagster does not retry."""
    try:
        yield
    except (StorageError, VersionConflictError):
        raise  # a store's hiccup, or another writer's commit first: a rerun succeeds
    except (ValueError, TypeError, KeyError, FileNotFoundError, ConfigurationError, MDSError) as err:
        raise Failure(description=str(err), allow_retries=False) from err
