"""A classic Spark session's JVM, started so that it prints nothing a user cannot act on.

Spark 4.3's launcher always passes ``--add-modules=jdk.incubator.vector``
(``org.apache.spark.launcher.JavaModuleOptions``), and the JVM announces every incubator module it
loads with ``WARNING: Using incubator modules: jdk.incubator.vector`` on stderr. No JVM or Spark
setting turns that line off, and it is the first thing every run of ``make demo`` and ``make ui``
printed. So the JVM's stderr comes through a pipe, and a thread passes every other line on to this
process's stderr (file descriptor 2, where it went before) as it arrives.

pyspark's ``launch_gateway`` passes every setting of the conf it is given as ``--conf key=value``
arguments of ``spark-submit``, and so of the JVM: any local user can read them in ``ps`` or
``/proc/<pid>/cmdline`` for as long as the run lasts. So the JVM is launched without the settings whose
names hold secrets (``secret_setting``), and the SparkContext gets the whole conf afterwards: pyspark
copies it into the JVM's ``SparkConf`` over py4j (``SparkContext._do_init``), before the context reads
it, so ``spark.hadoop.*`` still reaches the Hadoop configuration and ``spark.executorEnv.*`` the
executors. (Settings the JVM needs when it starts, such as ``spark.driver.extraJavaOptions``, have to be
on its command line; no secret belongs in them.)
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import threading
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkConf, SparkContext

INCUBATOR_NOTICE = b"WARNING: Using incubator modules: jdk.incubator.vector"
# Setting names that hold a secret: S3A/ABFS/GCS keys and tokens, SAS, Spark's own auth and TLS
# passwords, and spark.executorEnv.* credentials (AWS_SECRET_ACCESS_KEY, DATABRICKS_TOKEN...).
SECRET_SETTING = re.compile(
    r"secret|password|passwd|token|credential|access.?key|account.?key|private.?key|sas|signature", re.IGNORECASE
)


def secret_setting(key: str) -> bool:
    """Whether the Spark setting ``key`` holds a secret, kept off the JVM's command line."""
    return SECRET_SETTING.search(key) is not None


def start_context(conf: SparkConf) -> SparkContext:
    """A new SparkContext for ``conf``, its JVM's stderr without the incubator notice.

    No secret setting goes on the JVM's command line (the context gets them over py4j).
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    launch = SparkConf(loadDefaults=False).setAll([(k, v) for k, v in conf.getAll() if not secret_setting(k)])
    gateway = launch_gateway(launch, popen_kwargs={"stderr": subprocess.PIPE})  # type: ignore[no-untyped-call]
    # launch_gateway keeps the Popen on the gateway: its stderr lives as long as the JVM.
    threading.Thread(target=pass_on, args=(gateway.proc.stderr,), name="spark-jvm-stderr", daemon=True).start()
    return SparkContext(conf=conf, gateway=gateway)


def pass_on(stream: IO[bytes], fd: int = 2) -> None:
    """Copy ``stream`` to ``fd`` line by line, leaving out the incubator notice, until the JVM closes it."""
    for line in iter(stream.readline, b""):
        if line.rstrip(b"\r\n") == INCUBATOR_NOTICE:
            continue
        with contextlib.suppress(
            OSError
        ):  # our stderr is gone; keep draining, or the JVM would block once the pipe is full
            os.write(fd, line)
    stream.close()
