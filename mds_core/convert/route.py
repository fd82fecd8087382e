"""The two questions ``dataframe_to_mds`` asks once, at its door, and hands down as a ``Route``.

* **Classic Spark or Spark Connect?** A Connect session has no ``sparkContext``, RDD or JVM: the job
  carries a tag instead of a job group, its progress comes from the server, and its columns are built
  with Connect's own ``functions`` (``mds_core.convert.spark_connect``).
* **Is the dataset's home remote?** Then the executors stage each attempt on their own disks and
  upload it, and the driver commits through a store; else every attempt is written in place under a
  local directory the driver renames (``mds_core.convert.staging``).

The schema, cluster and staging modules take the answers as parameters instead of asking again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from mds_core.storage.output import Out, OutputLocation, parse_out
from mds_core.storage.urls import is_remote


@dataclass(frozen=True)
class Route:
    """How one conversion runs and where it writes.

    Attributes:
        connect: the DataFrame belongs to a Spark Connect session.
        location: the parsed ``out`` (``mds_core.storage.output.parse_out``).
        url: the dataset's home: a URL when ``remote``, else an absolute path.
        remote: the home is a URL (``s3://``, ``gs://``, ...), not a local directory.
    """

    connect: bool
    location: OutputLocation
    url: str
    remote: bool

    @property
    def shared_local_out(self) -> str | None:
        """The local directory the executors write in themselves (``out`` names no other home), if any.

        The one every executor must see (``mds_core.convert.cluster``).
        """
        if self.location.remote is None and self.location.local:
            return os.path.abspath(self.location.local)
        return None


def route_for(out: Out, *, connect: bool) -> Route:
    """The ``Route`` of a conversion writing to ``out`` from a classic (``connect=False``) or Connect session."""
    location = parse_out(out)
    home = location.home
    remote = is_remote(home)
    return Route(connect=connect, location=location, url=home if remote else os.path.abspath(home), remote=remote)
