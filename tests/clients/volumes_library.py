"""What a converting cluster does with the ``databricks`` extra alone, run in that environment
(``.cache/clients/volumes-library``): write shards to a Volume, convert an Arrow table there (the
executors' half of ``dataframe_to_mds``), commit a shard-set version, and read it back.

    <library python> tests/clients/volumes_library.py <dbfs:/Volumes/... root>

Prints one JSON line; run from outside the checkout, so only the installed wheel is importable.
"""

from __future__ import annotations

import importlib.util
import json
import sys


def main() -> None:
    import pyarrow as pa

    from mds_core import MDSWriter
    from mds_core.convert.table import table_to_mds
    from mds_core.versions import ShardSet

    root = sys.argv[1]
    with MDSWriter(out=f"{root}/plain", columns={"id": "int64", "name": "str"}) as writer:
        for i in range(10):
            writer.write({"id": i, "name": f"n{i}"})
    table = pa.table({"id": list(range(20)), "name": [f"t{i}" for i in range(20)]})
    converted = table_to_mds(table, f"{root}/table")
    shard_set = ShardSet(f"{root}/set")
    with shard_set.transaction("overwrite") as tx:
        table_to_mds(table, tx.out)
    published = shard_set.published()
    assert published is not None  # the transaction above published version 1
    version = shard_set.version(published)
    mds_core_spec = importlib.util.find_spec("mds_core")
    assert mds_core_spec is not None
    print(
        json.dumps(
            {
                "torch": importlib.util.find_spec("torch") is not None,
                "pyspark": importlib.util.find_spec("pyspark") is not None,
                "mds_core": mds_core_spec.origin,
                "converted_rows": converted.rows,
                "version": version.number,
                "version_rows": version.rows,
            }
        )
    )


if __name__ == "__main__":
    main()
