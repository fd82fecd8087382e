"""What each page's examples need that the page itself does not make: its explicit setup.

``setup`` runs in the page's process before its first block (Python, in the blocks' namespace);
``before`` runs before the block whose text contains the key (the state the page's prose describes at
that point); ``replace`` rewrites text in every block and ``output of:`` command before it runs, for
paths no test may use as written (``/local_disk/...`` on the machine's root file system becomes a folder
of the page's workspace). A page not listed needs nothing.

URLs such as ``s3://bucket/...`` and ``s3://my-bucket/...`` reach a loopback S3 server (moto) that the
setup starts, with those buckets, so the lines run as written.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Page:
    setup: str = ""
    before: dict[str, str] = field(default_factory=dict)
    replace: dict[str, str] = field(default_factory=dict)


LOCAL_DISK = {"/local_disk/": "local_disk/"}

PAGES: dict[str, Page] = {
    "README.md": Page(
        setup="""
from tests.docs.setups import published_history
published_history("data/shard-sets/digits", versions=2)  # as `make demo` leaves it: versions 1 and 2, each published
"""
    ),
    "docs/format.md": Page(
        setup="""
from tests.docs.setups import small_dataset
small_dataset("data/root/part0", rows=50)  # the partitions merge_index merges
small_dataset("data/root/part1", rows=50)
"""
    ),
    "docs/ordering.md": Page(
        setup="""
from mds_core import StreamingDataLoader, StreamingDataset
from tests.docs.setups import small_dataset

small_dataset("data/ds", rows=1000)  # the dataset `mds check-order data/ds` simulates
loader = StreamingDataLoader(StreamingDataset(local="data/ds", batch_size=8, shuffle=True), batch_size=8)
for step, _ in zip(range(5), loader):  # a loader part way into its epoch
    pass
"""
    ),
    "docs/mixing.md": Page(
        setup="""
from tests.docs.setups import small_dataset

for name, rows in (("web", 600), ("code", 300), ("math", 100)):  # the three streams the page mixes
    small_dataset(f"data/{name}", rows=rows)
"""
    ),
    "docs/operations.md": Page(
        setup="""
from tests.docs.setups import digits_shard_set, moto_s3, upload

digits_shard_set("data/shard-sets/digits")  # the digits shard set, two versions, as the pipeline writes it
moto_s3("my-bucket")
upload("data/shard-sets/digits", "s3://my-bucket/shard-sets/digits")
""",
        replace=LOCAL_DISK,
    ),
    "docs/planning.md": Page(
        setup="""
from tests.docs.setups import tokens_index
tokens_index("data/tokens", samples=20_000, tokens=2048, size_limit=16 << 20)  # its index, and 156 MiB of sparse shards
""",
        replace={"/data/tokens": "data/tokens"},  # a folder of the workspace, not of the machine's root
    ),
    "docs/remote-storage.md": Page(
        setup="""
from tests.docs.setups import moto_s3
moto_s3("bucket")
""",
        replace=LOCAL_DISK,
    ),
    "docs/spark.md": Page(
        setup="""
import datetime as dt
import pandas
import pyarrow
from mds_core.convert import table_to_mds
from tests.docs.setups import moto_s3

moto_s3("bucket")  # for ("/scratch/train", "s3://bucket/train")
pandas_df = pandas.DataFrame({"id": [1, 2, 3], "score": [0.5, None, 1.5]})  # a null, which "skip" drops
events = {  # what "Reading them back" reads: a date, a timestamp and a boolean, converted
    "day": pyarrow.array([dt.date(2026, 11, 30)]),
    "ts": pyarrow.array([dt.datetime(2026, 11, 30, 12, tzinfo=dt.timezone.utc)], pyarrow.timestamp("us", "UTC")),
    "flag": pyarrow.array([True]),
}
table_to_mds(pyarrow.table(events), "data/events")
""",
        replace={"/scratch/": "scratch/"},
    ),
    "docs/versions.md": Page(
        setup="""
from mds_core import MDSWriter
from mds_core.versions import ShardSet
from tests.docs.setups import moto_s3

moto_s3("bucket")
lineage = {"table": "raw.events", "day": "2026-12-01"}


def write_new_day(out):
    with MDSWriter(out=out, columns={"id": "int", "day": "str"}) as writer:
        for i in range(100):
            writer.write({"id": i, "day": "2026-12-01"})


with ShardSet("s3://bucket/sets/other").transaction("append", lineage=lineage) as tx:  # the second stream's
    write_new_day(tx.out)
""",  # the page's first block makes version 1 of s3://bucket/sets/events, as on a new bucket
        before={
            'publish=False, base="published"': """
for _ in range(3):  # versions 2 to 4, published
    with shard_set.transaction("append", lineage=lineage) as tx:
        write_new_day(tx.out)
with shard_set.transaction("append", lineage=lineage, publish=False) as tx:  # version 5, whose check failed
    write_new_day(tx.out)
"""
        },
        replace=LOCAL_DISK,
    ),
    "docs/pipelines.md": Page(
        setup="""
from tests.docs.setups import moto_s3, published_history, upload

moto_s3("my-bucket")
upload(published_history("data/shard-sets/digits", versions=2), "s3://my-bucket/shard-sets/digits")
""",
        replace=LOCAL_DISK,
    ),
}
