#!/usr/bin/env bash
# Build the client environments of the Databricks Connect matrix (tests/clients): one per client a
# Databricks user runs, each with mds_core installed (editable, with its core dependencies) beside the
# client's own pyspark. databricks-connect *is* a pyspark distribution, so it cannot share .venv.
#
#   .cache/clients/dbc16: databricks-connect 16.1 on Python 3.11 (pyspark 3.5 inside; runtimes up to 16.4 LTS)
#   .cache/clients/dbc17: databricks-connect 17.3 on Python 3.12 (pyspark 4.0 inside; runtimes 17.x)
#   .cache/clients/composer: Composer 0.32.1 (mosaicml), with the torch 2.7.0 it pins (a CUDA build, run on the CPU)
#   .cache/clients/volumes-library: the project's wheel with the `databricks` extra alone, plus the pyarrow a
#     Databricks runtime brings: what a converting cluster installs as a library (no torch, no pyspark here)
#
# Python 3.12 comes from $PYTHON312, else python3.12 on PATH, else pyenv's. Idempotent (a stamp per env).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CLIENTS="$ROOT/.cache/clients"

find_python312() {
    local candidate
    for candidate in "${PYTHON312:-}" "$(command -v python3.12 || true)" "$HOME"/.pyenv/versions/3.12*/bin/python; do
        if [[ -n "$candidate" && -x "$candidate" ]] && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
            echo "$candidate"
            return
        fi
    done
    echo "databricks-connect >= 17 needs Python 3.12: install it (pyenv install 3.12, or your system's python3.12) or set PYTHON312" >&2
    exit 1
}

build() {
    local name="$1" python="$2" client="$3" pins="${4:-}" check="${5:-import pyspark, mds_core.convert.spark; print('$1: pyspark', pyspark.__version__)}"
    local venv="$CLIENTS/$name" stamp="$CLIENTS/$name/.setup-stamp"
    local want
    want="$client $pins (mds_core editable)"
    if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        echo "$venv is up to date ($client)"
        return
    fi
    rm -rf "$venv"
    "$python" -m venv "$venv"
    local pip=("$venv/bin/python" -m pip install --quiet)
    "${pip[@]}" --upgrade pip 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    # The client first, then mds_core's own dependencies; mds_core itself without dependencies, so that
    # nothing replaces the client's pyspark with PyPI's.
    # shellcheck disable=SC2086  # pins: words on purpose
    "${pip[@]}" "$client" $pins "numpy>=1.26" "zstandard>=0.22" "xxhash>=3" "pillow>=10" "tqdm>=4.60" "click>=8.1" \
        "fsspec>=2024.6" "databricks-sdk>=0.162" "pyarrow>=15" "setuptools>=77" \
        2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
    "${pip[@]}" --no-deps --no-build-isolation -e "$ROOT" 2> >(grep -v "is ignored: it is neither" >&2)
    "$venv/bin/python" -c "$check"
    echo "$want" > "$stamp"
}

build_library() {
    local venv="$CLIENTS/volumes-library" stamp="$CLIENTS/volumes-library/.setup-stamp" want
    # The wheel is built from the working tree: rebuilt when the commit or an uncommitted change differs.
    want="$(git -C "$ROOT" rev-parse HEAD) $(git -C "$ROOT" diff HEAD -- mds_core pyproject.toml setup.py | sha256sum | cut -d' ' -f1)"
    if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        echo "$venv is up to date"
        return
    fi
    rm -rf "$venv"
    "${PYTHON:-python3}" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip 2> >(grep -v "is ignored: it is neither" >&2)
    # Not editable: the installed wheel, as on a cluster.
    "$venv/bin/python" -m pip install --quiet "$ROOT[databricks]" "pyarrow>=15" 2> >(grep -v "is ignored: it is neither" >&2)
    echo "$want" > "$stamp"
}

mkdir -p "$CLIENTS"
build_library
# databricks-connect 16 keeps numpy < 2, which the newest pyarrow no longer imports with.
build dbc16 "${PYTHON:-python3}" "databricks-connect==16.1.7" "pyarrow<20"
build dbc17 "$(find_python312)" "databricks-connect==17.3.15"
build composer "${PYTHON:-python3}" "mosaicml==0.32.1" "" \
    "import composer, torch, mds_core.streaming; print('composer:', composer.__version__, 'torch', torch.__version__)"
