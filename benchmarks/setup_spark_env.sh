#!/usr/bin/env bash
# Build benchmarks/.venv-spark35: the environment in which the reference's Spark converter
# (`streaming.base.converters.dataframe_to_mds`, mosaicml-streaming 0.13.0) runs for
# benchmarks/bench_spark.py. The reference requires pyspark < 4, while this project pins
# pyspark 4.3, so it cannot share .venv or benchmarks/.venv. Idempotent.
#
#   bash benchmarks/setup_spark_env.sh
#
# Contents: CPU torch 2.13.0 (from the local wheel on disk), pyspark 3.5.x, mosaicml-streaming
# 0.13.0 (--no-deps, as in setup_env.sh: it declares torchvision, which does not import beside
# CPU torch; the stand-in under benchmarks/stubs is put on sys.path instead), its run-time
# dependencies, and pandas/pyarrow for Spark's Arrow path. mds_core is *not* installed here.
set -euo pipefail

BENCH_DIR="$(cd "$(dirname "$0")" && pwd)"
VENV="$BENCH_DIR/.venv-spark35"
PY="$VENV/bin/python"

STAMP="$VENV/.mds-spark35-setup-stamp"
stamp_value() { sha256sum "$BENCH_DIR/setup_spark_env.sh" | cut -d' ' -f1; }
if [[ -x "$PY" && -f "$STAMP" && "$(cat "$STAMP")" == "$(stamp_value)" ]]; then
    echo "benchmarks/.venv-spark35 is up to date (delete $STAMP to force a re-install)"
    exit 0
fi

[[ -x "$PY" ]] || python3 -m venv "$VENV"

CONSTRAINTS="$VENV/constraints.txt"
cat > "$CONSTRAINTS" <<EOF
torch==2.13.0
numpy<2.2.0
pyspark>=3.5,<3.6
pandas>=2.0,<2.3
pyarrow>=14,<18
mosaicml-streaming==0.13.0
xxhash<4
EOF

pip_install() {
    "$PY" -m pip install --quiet -c "$CONSTRAINTS" "$@" \
        2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
}

pip_install --upgrade pip
FIND_LINKS=()
[[ -d /opt/wheels ]] && FIND_LINKS=(--find-links /opt/wheels)
if ! "$PY" -c "import torch, sys; sys.exit(torch.__version__ != '2.13.0+cpu')" 2>/dev/null; then
    pip_install "${FIND_LINKS[@]}" --only-binary torch "torch==2.13.0"
fi
pip_install --no-deps "mosaicml-streaming==0.13.0"
pip_install "pyspark>=3.5,<3.6" "pandas>=2.0,<2.3" "pyarrow>=14,<18" \
    "numpy>=1.21.5,<2.2.0" "tqdm>=4.64.0,<5" "transformers>=4.21.3,<5" "catalogue>=2,<3" \
    "Brotli>=1.0.9" "python-snappy>=0.6.1,<1" "zstd>=1.5.2.5,<2" "xxhash>=3.0.0,<4" \
    pillow filelock requests "urllib3>=1.26" "boto3>=1.21.45,<2" psutil

SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$BENCH_DIR/stubs" > "$SITE/mds_bench_stubs.pth"

SMOKE_TMP="$(mktemp -d)"
trap 'rm -rf "$SMOKE_TMP"' EXIT
TMPDIR="$SMOKE_TMP" "$PY" - <<'EOF'
import pyspark, pandas, pyarrow, numpy, streaming
from streaming.base.converters import dataframe_to_mds  # noqa: F401
print("pyspark", pyspark.__version__, "| streaming", streaming.__version__, "| pandas", pandas.__version__,
      "| pyarrow", pyarrow.__version__, "| numpy", numpy.__version__)
EOF
stamp_value > "$STAMP"
