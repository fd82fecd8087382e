"""Real Delta tables for the tests: written by deltalake, plus the two things delta-rs 1.6 does not write.

delta-rs deletes and updates by rewriting files even where deletion vectors are enabled, so
``commit_deletion_vector`` commits one by hand, in the format of the Delta protocol ("Deletion Vector Format"):
a RoaringBitmapArray in a DV file, referenced by an ``add`` action. ``require_reader_feature`` rewrites the
first commit's protocol action so that it names a reader feature.
"""

from __future__ import annotations

import json
import struct
import time
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa

from mds_core import LocalDataset

_ROARING_SERIAL_COOKIE_NO_RUNCONTAINER = 12346
_DV_MAGIC = 1681511377  # RoaringBitmapArray, portable serialization


def rows(out: Path, key: str = "id") -> list[dict[str, Any]]:
    """The samples of the MDS dataset at ``out`` as plain Python dicts, sorted by ``key``."""
    plain = [{name: _plain(value) for name, value in sample.items()} for sample in LocalDataset(str(out))]
    return sorted(plain, key=lambda sample: sample[key])


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") and getattr(value, "ndim", 0) == 0 else value


def recorded(table: str | Path, version: int, storage_options: dict[str, str] | None = None) -> dict[str, Any]:
    """The source record a shard set converted at ``version`` keeps (``delta_lineage``'s fields): the URI, id, schema."""
    import deltalake

    loaded = deltalake.DeltaTable(table, version=version, storage_options=storage_options)
    schema = loaded.schema().to_json()
    return {"table_uri": loaded.table_uri, "table_id": str(loaded.metadata().id), "schema": schema}


def log_actions(table: Path, version: int) -> list[dict[str, Any]]:
    """The actions of one commit of ``table``'s log."""
    path = table / "_delta_log" / f"{version:020}.json"
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def _write_actions(table: Path, version: int, actions: list[dict[str, Any]]) -> None:
    path = table / "_delta_log" / f"{version:020}.json"
    path.write_text("".join(json.dumps(action) + "\n" for action in actions))


def require_reader_feature(table: Path, feature: str) -> None:
    """Make ``table``'s protocol (in its first commit) require reader and writer ``feature``."""
    actions = log_actions(table, 0)
    for action in actions:
        if "protocol" in action:
            action["protocol"] = {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": [feature],
                "writerFeatures": [feature],
            }
    _write_actions(table, 0, actions)


def _roaring32(values: list[int]) -> bytes:
    """A 32-bit portable Roaring bitmap of ``values`` (array containers only: fine for small sets)."""
    by_key: dict[int, list[int]] = {}
    for value in sorted(values):
        by_key.setdefault(value >> 16, []).append(value & 0xFFFF)
    keys = sorted(by_key)
    head = struct.pack("<II", _ROARING_SERIAL_COOKIE_NO_RUNCONTAINER, len(keys))
    head += b"".join(struct.pack("<HH", key, len(by_key[key]) - 1) for key in keys)
    offsets, body = b"", b""
    for key in keys:
        offsets += struct.pack("<I", len(head) + 4 * len(keys) + len(body))
        body += struct.pack(f"<{len(by_key[key])}H", *by_key[key])
    return head + offsets + body


def commit_deletion_vector(table: Path, deleted_rows: list[int]) -> int:
    """Delete rows ``deleted_rows`` (positions in the file) of ``table``'s only data file with a deletion vector.

    Returns the new version. The table must have been written with ``delta.enableDeletionVectors``.
    """
    version = max(int(p.stem) for p in (table / "_delta_log").glob("*.json")) + 1
    [add] = [a["add"] for v in range(version) for a in log_actions(table, v) if "add" in a]
    bitmap = struct.pack("<IQI", _DV_MAGIC, 1, 0) + _roaring32(deleted_rows)
    dv_file = table / "deletion_vector_by_hand.bin"
    dv_file.write_bytes(b"\x01" + struct.pack(">i", len(bitmap)) + bitmap + struct.pack(">I", zlib.crc32(bitmap)))
    now = int(time.time() * 1000)
    descriptor = {
        "storageType": "p",
        "pathOrInlineDv": dv_file.as_uri(),
        "offset": 1,
        "sizeInBytes": len(bitmap),
        "cardinality": len(deleted_rows),
    }
    remove = {k: add[k] for k in ("path", "partitionValues", "size")}
    actions = [
        {"remove": {**remove, "deletionTimestamp": now, "dataChange": True, "extendedFileMetadata": True}},
        {"add": {**add, "deletionVector": descriptor}},
        {"commitInfo": {"timestamp": now, "operation": "DELETE"}},
    ]
    _write_actions(table, version, actions)
    return version


def ids(n: int, start: int = 0) -> pa.Array:
    """``start``..``start + n - 1`` as int64."""
    return pa.array(range(start, start + n), pa.int64())
