"""Which of the reference's tests are public-API tests: the rule, applied to a test file's source.

A test counts when it uses the reference's package (``streaming``) and only through names of its
public API: the names a training or data-preparation script imports (``PUBLIC``). A test that
uses a name of a part mds_core deliberately does without (``INTERNAL``: shared memory, the
torch.distributed helpers, cloud uploaders, the dataset's internal helpers, other formats, the
bundled datasets) is excluded, and so is a test that uses nothing of ``streaming`` (it tests the
test harness or a third party). "Uses" is decided from the source: the names in the test
function, its decorators, its class, and the module-level helpers and same-file fixtures it
reaches. A name of ``streaming`` in neither table stops the run, so the rule stays complete.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

_FORMATS = "formats other than MDS (CSV, TSV, JSON): mds_core writes and reads MDS only"
_SHARED = "shared memory (its arrays, barriers, prefixes and clean-up): mds_core coordinates through files"
_DIST = "torch.distributed helpers: mds_core reads the world from the environment and needs no collectives"
_CLOUD = "cloud uploaders and downloaders: mds_core reaches every store through fsspec"
_HELPERS = "the reference's internal helpers (Array, Spanner, catalogue registries, util helpers)"
_BUNDLED = "the reference's bundled datasets (vision, text, multimodal)"

_WRITERS = {"CSVWriter", "JSONWriter", "TSVWriter", "XSVWriter"}
_MAIN = {"StreamingDataset", "StreamingDataLoader", "Stream", "MDSWriter", "LocalDataset"}
_ENCODING_CLASSES = {
    *"Bytes Str Int NDArray UInt8 UInt16 UInt32 UInt64 Int8 Int16 Int32 Int64".split(),
    *"Float16 Float32 Float64 StrInt StrFloat StrDecimal PIL JPEG JPEGArray PNG".split(),
    *"PILList JPEGList PNGList Pickle JSON Encoding".split(),
}
_ENCODING_FUNCTIONS = {
    "get_mds_encodings",
    "is_mds_encoding",
    "is_mds_encoding_safe",
    "get_mds_encoded_size",
    "mds_encode",
    "mds_decode",
}
_SHUFFLES = {f"get_shuffle_{algo}" for algo in ("naive", "py1b", "py1br", "py1e", "py1s", "py2s")}

# module -> the names of it a script uses; None: the module itself, as `import ... as x` binds it.
PUBLIC: dict[str, set[str]] = {
    "streaming": _MAIN,
    "streaming.base": _MAIN,
    "streaming.base.dataset": {"StreamingDataset"},
    "streaming.base.dataloader": {"StreamingDataLoader"},
    "streaming.base.stream": {"Stream", "streams_registry"},
    "streaming.base.local": {"LocalDataset"},
    "streaming.base.format": {"MDSWriter"},
    "streaming.base.format.mds": {"MDSWriter"},
    "streaming.base.format.mds.encodings": _ENCODING_CLASSES | _ENCODING_FUNCTIONS,
    "streaming.base.compression": {
        *"Brotli Bzip2 Gzip Snappy Zstandard compress decompress".split(),
        *"get_compression_extension get_compressions is_compression".split(),
    },
    "streaming.base.hashing": {"get_hash", "get_hashes", "is_hash"},
    "streaming.base.partition": {"get_partitions"},
    "streaming.base.shuffle": {"get_shuffle", *_SHUFFLES},
    "streaming.base.sampling": {"get_sampling"},
    "streaming.base.batching": {"generate_work"},
    "streaming.base.world": {"World"},
    "streaming.base.util": {"merge_index", "bytes_to_int", "number_abbrev_to_int"},
    "streaming.base.converters": {"dataframe_to_mds"},
}

# Module prefix or module.name -> why a test using it is not a public-API test.
INTERNAL: dict[str, str] = {
    "streaming.base.shared": _SHARED,
    "streaming.base.constant": _SHARED,
    "streaming.base.util.clean_stale_shared_memory": _SHARED,
    "streaming.base.distributed": _DIST,
    "tests.common.distributed": _DIST,
    "streaming.base.storage": _CLOUD,
    "streaming.base.util._format_remote_index_files": _CLOUD,
    "streaming.base.array": _HELPERS,
    "streaming.base.spanner": _HELPERS,
    "streaming.base.registry_utils": _HELPERS,
    "streaming.base.util.get_list_arg": _HELPERS,
    "streaming.base.util.retry": _HELPERS,
    "streaming.base.format.xsv": _FORMATS,
    "streaming.base.format.json": _FORMATS,
    **{f"streaming.{writer}": _FORMATS for writer in _WRITERS},
    **{f"streaming.base.{writer}": _FORMATS for writer in _WRITERS},
    "streaming.vision": _BUNDLED,
    "streaming.text": _BUNDLED,
    "streaming.multimodal": _BUNDLED,
}
NO_REFERENCE = "uses nothing of the reference's package (tests the test harness or a third party)"
_WATCHED = ("streaming", "tests.common.distributed")


def classify_ref(ref: str) -> str | None:
    """``None`` for a public name (``module.name`` or a module), else why it is not public."""
    parts = ref.split(".")
    for cut in range(len(parts), 0, -1):
        reason = INTERNAL.get(".".join(parts[:cut]))
        if reason:
            return reason
    module, _, name = ref.rpartition(".")
    if ref in PUBLIC or name in PUBLIC.get(module, ()):
        return None
    raise LookupError(f"{ref} is in neither PUBLIC nor INTERNAL of {__file__}: classify it")


@dataclass
class _Module:
    """A test file: what its names are bound to, and its top-level definitions."""

    bindings: dict[str, str] = field(default_factory=dict)  # local name -> dotted reference
    defs: dict[str, ast.AST] = field(default_factory=dict)
    fixtures: set[str] = field(default_factory=set)


def _watched(dotted: str) -> bool:
    return any(dotted == root or dotted.startswith(root + ".") for root in _WATCHED)


def _bind_imports(node: ast.AST, bindings: dict[str, str]) -> None:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Import):
            for alias in sub.names:
                if _watched(alias.name):
                    # `import a.b.c` binds `a`; `import a.b.c as x` binds x to a.b.c.
                    bindings[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else "streaming"
        elif isinstance(sub, ast.ImportFrom) and sub.module and _watched(sub.module):
            for alias in sub.names:
                bindings[alias.asname or alias.name] = f"{sub.module}.{alias.name}"


def _is_fixture(node: ast.AST) -> bool:
    decorators = getattr(node, "decorator_list", [])
    return any("fixture" in ast.unparse(dec) for dec in decorators)


def parse_module(source: str) -> _Module:
    tree = ast.parse(source)
    module = _Module()
    _bind_imports(tree, module.bindings)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            module.defs[node.name] = node
            if _is_fixture(node):
                module.fixtures.add(node.name)
    return module


def _refs_of(node: ast.AST, module: _Module, seen: set[str]) -> set[str]:
    """The dotted references of ``streaming`` that ``node`` reaches, through same-file helpers."""
    local = dict(module.bindings)
    _bind_imports(node, local)  # imports inside the function
    refs: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute):
            chain = _attribute_chain(sub)
            if chain and local.get(chain[0]) in PUBLIC:  # `mdsEnc.Int`: which name of a public module
                refs.add(f"{local[chain[0]]}.{chain[1]}")
        elif isinstance(sub, ast.Name):
            if sub.id in local and local[sub.id] not in PUBLIC:  # a public module counts by its names
                refs.add(local[sub.id])
            elif sub.id in module.defs and sub.id not in seen:
                seen.add(sub.id)
                refs |= _refs_of(module.defs[sub.id], module, seen)
        elif isinstance(sub, ast.arg) and sub.arg in module.fixtures and sub.arg not in seen:
            seen.add(sub.arg)
            refs |= _refs_of(module.defs[sub.arg], module, seen)
    return refs


def _attribute_chain(node: ast.Attribute) -> list[str] | None:
    names = [node.attr]
    value = node.value
    while isinstance(value, ast.Attribute):
        names.insert(0, value.attr)
        value = value.value
    return [value.id, *names] if isinstance(value, ast.Name) else None


def test_reasons(path: Path) -> dict[str, str | None]:
    """``{"test_x": None or reason, "TestClass::test_y": ...}`` for every test function in the file."""
    module = parse_module(path.read_text())
    reasons: dict[str, str | None] = {}
    for name, node in module.defs.items():
        if isinstance(node, ast.ClassDef) and name.startswith("Test"):
            context = [*node.bases, *node.decorator_list]
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                    reasons[f"{name}::{item.name}"] = _reason(item, context, module)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and name.startswith("test"):
            reasons[name] = _reason(node, [], module)
    return reasons


def _reason(func: ast.AST, context: list[ast.expr], module: _Module) -> str | None:
    seen: set[str] = set()
    refs = _refs_of(func, module, seen)
    for node in context:
        refs |= _refs_of(node, module, seen)
    if not refs:
        return NO_REFERENCE
    reasons = sorted({reason for reason in map(classify_ref, refs) if reason})
    return "; ".join(reasons) or None


def wholly_excluded(path: Path) -> dict[str, str] | None:
    """``{test: reason}`` when no test of the file counts (it is then not even imported), else None."""
    reasons = test_reasons(path)
    if not reasons or not all(reasons.values()):
        return None
    return {name: str(reason) for name, reason in reasons.items()}
