#!/usr/bin/env bash
# Build the benchmark environment in benchmarks/.venv (idempotent: re-running only
# installs what is missing).
#
#   bash benchmarks/setup_env.sh
#
# Contents: CPU torch 2.13.0 (from the local wheel on disk, never a CUDA build),
# mosaicml-streaming 0.13.0 (the reference), litdata, psutil, and this project
# (editable, --no-deps, once it has a pyproject.toml).
#
# mosaicml-streaming and litdata both declare `torchvision`, and PyPI's torchvision does
# not import beside CPU torch 2.13.0. So both are installed with --no-deps and their
# runtime dependencies are listed here explicitly, minus torchvision (replaced by the
# stand-in under benchmarks/stubs/, see stubs/README.md) and minus the cloud SDKs that
# only streaming's remote upload/download paths use (google-cloud-storage, azure-*, oci,
# paramiko) and matplotlib (simulator only). pip's resolver therefore prints an ERROR
# listing those as missing (so would `pip check`); that is expected.
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$BENCH_DIR/.." && pwd)"
VENV="$BENCH_DIR/.venv"
PY="$VENV/bin/python"

TORCH_VERSION="2.13.0"
STREAMING_VERSION="0.13.0"
LITDATA_VERSION="0.2.76"

# Fast path for re-runs (`make bench` calls this every time): nothing to do when this
# script and the project's pyproject.toml are unchanged since the last complete run.
STAMP="$VENV/.mds-bench-setup-stamp"
stamp_value() {
    cat "$BENCH_DIR/setup_env.sh" "$ROOT/pyproject.toml" "$ROOT/setup.py" "$ROOT/mds_core/order/shuffle/_fisher_yates.c" 2>/dev/null | sha256sum | cut -d' ' -f1
}
if [[ -x "$PY" && -f "$STAMP" && "$(cat "$STAMP")" == "$(stamp_value)" ]]; then
    echo "benchmarks/.venv is up to date (delete $STAMP to force a re-install)"
    exit 0
fi

if [[ ! -x "$PY" ]]; then
    python3 -m venv "$VENV"
fi

# Every install below runs under these constraints, so no later step can swap torch
# (e.g. for a CUDA build) or move numpy past the reference's pin (numpy<2.2.0).
CONSTRAINTS="$VENV/mds-bench-constraints.txt"
cat > "$CONSTRAINTS" <<EOF
torch==$TORCH_VERSION
numpy<2.2.0
xxhash<4
mosaicml-streaming==$STREAMING_VERSION
litdata==$LITDATA_VERSION
EOF

pip_install() {
    # (drop pip's noise about this machine's configured-but-absent local index folders)
    "$PY" -m pip install --quiet -c "$CONSTRAINTS" "$@" \
        2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}

pip_install --upgrade pip

# 1. torch first: the CPU wheel that lies on disk (pip's find-links); fail if pip took
#    anything else.
FIND_LINKS=()
if [[ -d /opt/wheels ]]; then
    FIND_LINKS=(--find-links /opt/wheels)
fi
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.__version__ == '$TORCH_VERSION+cpu' else 1)" 2>/dev/null; then
    pip_install "${FIND_LINKS[@]}" --only-binary torch "torch==$TORCH_VERSION"
fi
"$PY" -c "import torch, sys; v = torch.__version__; print('torch', v); sys.exit(0 if v == '$TORCH_VERSION+cpu' else 'expected CPU torch $TORCH_VERSION, got ' + v)"

# 2. The reference and litdata, without their declared dependencies (torchvision) ...
pip_install --no-deps "mosaicml-streaming==$STREAMING_VERSION" "litdata==$LITDATA_VERSION"
# ... and the dependencies they need at run time here.
#   streaming: numpy<2.2, tqdm, transformers<5 (imported by streaming.text at import
#   time), catalogue, Brotli, python-snappy, zstd, xxhash<4, pillow, filelock, requests.
#   litdata: lightning-utilities, filelock, boto3, requests, urllib3, tifffile, obstore.
pip_install \
    "numpy>=1.21.5,<2.2.0" "tqdm>=4.64.0,<5" "transformers>=4.21.3,<5" "catalogue>=2,<3" \
    "Brotli>=1.0.9" "python-snappy>=0.6.1,<1" "zstd>=1.5.2.5,<2" "xxhash>=3.0.0,<4" \
    pillow filelock requests "urllib3>=1.26" \
    lightning-utilities "boto3>=1.21.45,<2" tifffile obstore \
    psutil

# 3. The stand-in torchvision (see stubs/README.md), on sys.path via a .pth file.
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$BENCH_DIR/stubs" > "$SITE/mds_bench_stubs.pth"

# 4. This project. Its own dependencies are installed explicitly (under the constraints
#    above) and the project itself with --no-deps, so it cannot move numpy.
pip_install numpy zstandard xxhash pillow tqdm click brotli cramjam  # + extras br, snappy
if [[ -f "$ROOT/pyproject.toml" || -f "$ROOT/setup.py" ]]; then
    pip_install --no-deps -e "$ROOT"
    rm -f "$SITE/mds_bench_project.pth"
else
    # No packaging metadata yet: put the repository root on sys.path instead, so that
    # `import mds_core` works as soon as the package exists. Re-run this script once
    # pyproject.toml is there to switch to the editable install.
    echo "setup_env.sh: no pyproject.toml in $ROOT yet; adding it to sys.path via .pth" >&2
    echo "$ROOT" > "$SITE/mds_bench_project.pth"
fi

# 5. Smoke check (in a private TMPDIR: importing torch creates $TMPDIR/torchinductor_<user>).
SMOKE_TMP="$(mktemp -d)"
trap 'rm -rf "$SMOKE_TMP"' EXIT
TMPDIR="$SMOKE_TMP" "$PY" - <<'EOF'
import importlib.metadata as md

import numpy
import streaming
import litdata
import torch

assert torch.__version__ == "2.13.0+cpu", torch.__version__
assert tuple(int(x) for x in numpy.__version__.split(".")[:2]) < (2, 2), numpy.__version__
print("streaming", streaming.__version__, "| litdata", litdata.__version__,
      "| numpy", numpy.__version__, "| torch", torch.__version__,
      "| transformers", md.version("transformers"))
try:
    from mds_core import LocalDataset, MDSWriter  # noqa: F401
    import mds_core
    print("mds_core importable from", mds_core.__path__[0])
except ImportError as exc:
    print("mds_core not importable yet:", exc)
EOF

# Complete only once there was a pyproject.toml to install (else re-run next time).
if [[ -f "$ROOT/pyproject.toml" ]]; then
    stamp_value > "$STAMP"
fi
