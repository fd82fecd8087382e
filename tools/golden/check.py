"""Compare regenerated fixtures with tests/fixtures.

Uncompressed shards, index.json, samples/ and expected/ must be byte-identical. A compressed shard is
compared decompressed, and its index.json without the compressed file's size and hashes: compressed bytes
depend on the compressor build (and gzip's header holds the time it was written). The order files are
compared as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streaming.base.compression import decompress

from tools.golden.mds_cases import CASES

ORDER_FILES = ("shuffle.json", "partition.json", "epochs.json", "resume.json")


@dataclass
class Report:
    identical: list[str] = field(default_factory=list)
    equivalent: list[str] = field(default_factory=list)  # equal decompressed / as JSON, not byte for byte
    differ: list[str] = field(default_factory=list)

    def add_difference(self, item: str) -> None:
        if item not in self.differ:  # a full check lists one-sided files twice: per case and per tree
            self.differ.append(item)

    def record(self, same: bool, item: str) -> None:
        """A file equal other than byte for byte, or else a difference."""
        if same:
            self.equivalent.append(item)
        else:
            self.add_difference(item)

    @property
    def ok(self) -> bool:
        return not self.differ

    def text(self) -> str:
        lines = [f"{len(self.identical)} files byte-identical"]
        lines += [f"equal, not byte-identical: {item}" for item in self.equivalent]
        lines += [f"DIFFERS: {item}" for item in self.differ]
        lines.append("OK: every file reproduces" if self.ok else f"FAILED: {len(self.differ)} files differ")
        return "\n".join(lines)


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()} if root.is_dir() else set()


def _without_zip_details(index: dict[str, Any]) -> dict[str, Any]:
    for shard in index["shards"]:
        if shard.get("zip_data"):
            shard["zip_data"] = {"basename": shard["zip_data"]["basename"]}
    return index


def _compare_file(new: Path, ref: Path, name: str, report: Report) -> None:
    if not (new.is_file() and ref.is_file()):
        report.add_difference(f"{name} (not in tests/fixtures)" if new.is_file() else f"{name} (not generated)")
        return
    new_bytes, ref_bytes = new.read_bytes(), ref.read_bytes()
    if new_bytes == ref_bytes:
        report.identical.append(name)
    elif new.name == "index.json":
        same = _without_zip_details(json.loads(new_bytes)) == _without_zip_details(json.loads(ref_bytes))
        report.record(same, f"{name} (compressed files' sizes and hashes aside)")
    elif ".mds." in new.name:  # shard.00000.mds.zstd: the extension names the codec
        codec = new.name.rsplit(".", 1)[1]
        same = decompress(codec, new_bytes) == decompress(codec, ref_bytes)
        report.record(same, f"{name} (compared decompressed)")
    else:
        report.add_difference(name)


def _one_sided(new: Path, ref: Path, label: str, report: Report) -> set[str]:
    """Files on one side only differ; returns the files on both."""
    new_files, ref_files = _files(new), _files(ref)
    for f in sorted(ref_files - new_files):
        report.add_difference(f"{label}/{f} (not generated)")
    for f in sorted(new_files - ref_files):
        report.add_difference(f"{label}/{f} (not in tests/fixtures)")
    return new_files & ref_files


def compare_tree(new: Path, ref: Path, label: str, report: Report) -> None:
    """Every file under ``ref`` against the same path under ``new``; missing and extra files differ."""
    for f in sorted(_one_sided(new, ref, label, report)):
        _compare_file(new / f, ref / f, f"{label}/{f}", report)


def _compare_json(new: dict[str, Any], ref: dict[str, Any], name: str, raw_equal: bool, report: Report) -> None:
    new_cases, ref_cases = new["cases"], ref["cases"]
    if len(new_cases) != len(ref_cases):
        report.add_difference(f"{name} ({len(new_cases)} cases, tests/fixtures has {len(ref_cases)})")
    elif cases := [i for i, (a, b) in enumerate(zip(new_cases, ref_cases)) if a != b]:
        report.add_difference(f"{name} (cases {cases[:10]} differ)")
    elif new != ref:
        report.add_difference(f"{name} (outside the cases)")
    else:
        (report.identical if raw_equal else report.equivalent).append(name)


def compare_mds(new: Path, ref: Path, names: list[str], report: Report) -> None:
    new_meta, ref_meta = json.loads((new / "cases.json").read_text()), json.loads((ref / "cases.json").read_text())
    ref_meta["cases"] = [c for c in ref_meta["cases"] if c["name"] in names]
    raw_equal = (new / "cases.json").read_bytes() == (ref / "cases.json").read_bytes()
    _compare_json(new_meta, ref_meta, "mds-golden/cases.json", raw_equal, report)
    for name in names:
        for kind in ("samples", "expected"):
            _compare_file(
                new / kind / f"{name}.jsonl", ref / kind / f"{name}.jsonl", f"mds-golden/{kind}/{name}.jsonl", report
            )
        compare_tree(new / "datasets" / name, ref / "datasets" / name, f"mds-golden/datasets/{name}", report)


def compare_order(new: Path, ref: Path, limit: int | None, report: Report) -> None:
    for name in ORDER_FILES:
        new_obj, ref_obj = json.loads((new / name).read_text()), json.loads((ref / name).read_text())
        ref_obj["cases"] = ref_obj["cases"][:limit]
        raw_equal = (new / name).read_bytes() == (ref / name).read_bytes()
        _compare_json(new_obj, ref_obj, f"order-golden/{name}", raw_equal, report)
    compare_tree(new / "datasets", ref / "datasets", "order-golden/datasets", report)


def compare(generated: Path, fixtures: Path, names: list[str], order_limit: int | None) -> Report:
    """``generated`` (mds-golden/ and order-golden/, as the generators write them) against ``fixtures``."""
    report = Report()
    compare_mds(generated / "mds-golden", fixtures / "mds-golden", names, report)
    compare_order(generated / "order-golden", fixtures / "order-golden", order_limit, report)
    if order_limit is None and set(names) == {case.name for case in CASES}:  # the whole set: no file may be left over
        for tree in ("mds-golden", "order-golden"):
            _one_sided(generated / tree, fixtures / tree, tree, report)
    return report
