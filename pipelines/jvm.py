"""A classic Spark session's JVM, started so that it prints nothing a user cannot act on.

Spark 4.3's launcher always passes ``--add-modules=jdk.incubator.vector``
(``org.apache.spark.launcher.JavaModuleOptions``), and the JVM announces every incubator module it
loads with ``WARNING: Using incubator modules: jdk.incubator.vector`` on stderr. No JVM or Spark
setting turns that line off, and it is the first thing every run of ``make demo`` and ``make ui``
printed. So the JVM's stderr comes through a pipe, and a thread passes every other line on to this
process's stderr (file descriptor 2, where it went before) as it arrives.
"""

from __future__ import annotations

import os
import subprocess
import threading
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkConf, SparkContext

INCUBATOR_NOTICE = b"WARNING: Using incubator modules: jdk.incubator.vector"


def start_context(conf: SparkConf) -> SparkContext:
    """A new SparkContext for ``conf``, its JVM's stderr without the incubator notice."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})  # type: ignore[no-untyped-call]
    # launch_gateway keeps the Popen on the gateway: its stderr lives as long as the JVM.
    threading.Thread(target=pass_on, args=(gateway.proc.stderr,), name="spark-jvm-stderr", daemon=True).start()
    return SparkContext(conf=conf, gateway=gateway)


def pass_on(stream: IO[bytes], fd: int = 2) -> None:
    """Copy ``stream`` to ``fd`` line by line, leaving out the incubator notice, until the JVM closes it."""
    for line in iter(stream.readline, b""):
        if line.rstrip(b"\r\n") == INCUBATOR_NOTICE:
            continue
        try:
            os.write(fd, line)
        except OSError:
            pass  # our stderr is gone; keep draining, or the JVM would block once the pipe is full
    stream.close()
