"""The store registry (``mds_core/storage/stores.py``): one entry per kind of store, and everything that reads it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mds_core.errors import ConfigurationError
from mds_core.storage.exclusive import ExclusiveCreateUnsupported, supports_exclusive_create
from mds_core.storage.remote import open_store
from mds_core.storage.stores import FSSPEC_FALLBACK, STORES, StoreKind, kind_of_scheme, remote_schemes, store_kind

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "remote-storage.md"
BEGIN = "<!-- store registry: begin"
END = "<!-- store registry: end -->"
ALIASES = [(name, scheme) for name, kind in STORES.items() for scheme in kind.schemes]


@pytest.mark.parametrize(("name", "scheme"), ALIASES)
def test_every_alias_resolves_to_its_entry(name: str, scheme: str) -> None:
    assert kind_of_scheme(scheme) is STORES[name]
    url = "file:///data/train" if scheme == "file" else f"{scheme}://bucket/datasets/train"
    assert store_kind(url) is STORES[name]
    assert supports_exclusive_create(scheme) == (STORES[name].exclusive_create is not None)


def test_each_scheme_has_one_entry_and_local_paths_are_the_local_entry() -> None:
    schemes = [scheme for _, scheme in ALIASES]
    assert len(schemes) == len(set(schemes))
    assert store_kind("data/train") is store_kind("/mnt/nfs/train") is store_kind("C:/data") is STORES["local"]
    assert store_kind("dbfs:/Volumes/main/default/shards") is STORES["volumes"]
    assert remote_schemes() == sorted(set(schemes) - {"file"})


def test_an_unknown_scheme_lists_the_registry_schemes() -> None:
    with pytest.raises(ConfigurationError) as caught:
        open_store("ftp://bucket/x")
    message = str(caught.value)
    assert message.startswith("ftp://bucket/x: unsupported URL scheme 'ftp'; use a local path, file://, ")
    assert message.endswith(", ".join(f"{s}://" for s in remote_schemes()))


def test_fsspec_schemes_go_to_the_fallback_only_when_asked() -> None:
    with pytest.raises(ConfigurationError, match="unsupported URL scheme 'memory'"):
        open_store("memory://registry-test/a")
    store = open_store("memory://registry-test/a", any_fsspec=True)
    assert store.kind is FSSPEC_FALLBACK and store.retry == 2
    store.write_bytes("x/y.bin", b"hello")
    assert store.list() == ["x/y.bin"] and store.read_bytes("x/y.bin") == b"hello"
    with pytest.raises(ExclusiveCreateUnsupported, match="memory:// cannot create a file exclusively"):
        store.write_if_absent("manifest.json", b"{}")
    store.delete_tree("")
    with pytest.raises(ConfigurationError, match="'nope': neither a store of mds_core .* nor a protocol fsspec knows"):
        open_store("nope://x/y", any_fsspec=True)


def test_an_entry_is_all_a_store_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store added as one entry (here fsspec's memory filesystem under a scheme of its own) is opened,
    named in errors and refused or used for exclusive creates by what the entry says, and nothing else."""
    import fsspec
    from fsspec.implementations.memory import MemoryFileSystem

    from mds_core.storage import stores

    def opened(url: str, timeout: float | None, options: dict) -> tuple:
        return MemoryFileSystem(**options), "/" + url.split("://", 1)[1]

    monkeypatch.setattr(
        stores,
        "STORES",
        {**STORES, "mem": StoreKind(name="memory", schemes=("mem",), filesystem=opened, exclusive_create=None)},
    )
    store = open_store("mem://added/root")
    store.write_bytes("a.bin", b"1")
    assert fsspec.filesystem("memory").cat_file("/added/root/a.bin") == b"1"
    assert not store.fs.dircache.use_listings_cache  # the registry turns the listing cache off for every store
    with pytest.raises(ConfigurationError, match=r"ftp://x: unsupported URL scheme 'ftp'; .*mem://"):
        open_store("ftp://x")
    with pytest.raises(ExclusiveCreateUnsupported, match=r"mem:// cannot create a file exclusively"):
        store.write_if_absent("m.json", b"{}")
    store.delete_tree("")


def render_table() -> str:
    """The docs' table of stores, as the registry says it."""
    rows = [
        "| store | URL schemes | install | first path component | exclusive create (version commits) |",
        "|---|---|---|---|---|",
    ]
    for kind in STORES.values():
        schemes = ", ".join(f"`{scheme}`" for scheme in kind.schemes)
        install = f"`mds-pipelines[{kind.extra}]` (`{kind.package}`)" if kind.package else "nothing"
        bucket = f"the {kind.bucket}, which must exist" if kind.bucket else "a folder"
        exclusive = kind.exclusive_create.how if kind.exclusive_create else "none: version commits are refused"
        rows.append(f"| {kind.name} | {schemes} | {install} | {bucket} | {exclusive} |")
    return "\n".join(rows)


def test_the_docs_table_is_the_registry() -> None:
    text = DOCS.read_text()
    start = text.index(BEGIN)
    table = text[text.index("\n", start) + 1 : text.index(END)].strip()
    assert table == render_table(), f"docs/remote-storage.md's table of stores should read:\n\n{render_table()}\n"


def test_the_docs_name_every_scheme_where_they_list_locations() -> None:
    section = DOCS.read_text().split("## Supported locations", 1)[1].split("\n## ", 1)[0]
    for scheme in remote_schemes():
        assert re.search(rf"`{scheme}:", section), f"docs/remote-storage.md's locations do not show {scheme}:"
