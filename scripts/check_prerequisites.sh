#!/usr/bin/env bash
# What `make test` needs from the system besides Python packages, checked before anything is built.
#
#   bash scripts/check_prerequisites.sh         # says what is missing and how to install it; exit 1 if anything is
#   bash scripts/check_prerequisites.sh --apt   # prints the missing Debian/Ubuntu package names (for .ci/run)
#
# Python 3.11+ (the project), make, Java 17+ (pyspark 4 starts a JVM), a C compiler with the Python
# headers (the C shuffle, mds_core/order/shuffle/_fisher_yates.c, which a test checks was built), and
# Chromium with chromedriver (the browser test of the Dagster UI, tests/e2e/test_browser.py), and Node.js 20+
# with npm (Azurite, the Azure Blob emulator of tests/storage/test_stores.py).
set -uo pipefail
PYTHON="${PYTHON:-python3}"
missing=()     # "what|debian package|how to get it elsewhere"

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    missing+=("Python 3.11 or newer as \$PYTHON (now: $("$PYTHON" --version 2>&1))|python3|https://www.python.org/downloads/")
fi
command -v make >/dev/null || missing+=("make|make|Xcode command line tools on macOS")
java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
if [ "${java_major:-0}" -lt 17 ] 2>/dev/null; then
    missing+=("Java 17 or newer (now: ${java_major:-none}), for pyspark|openjdk-17-jre-headless|brew install openjdk@17")
fi
command -v cc >/dev/null || missing+=("a C compiler (cc), for the C shuffle|gcc|Xcode command line tools on macOS")
if ! "$PYTHON" - <<'PY' 2>/dev/null
import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)
PY
then
    missing+=("the Python headers (Python.h), for the C shuffle|python3-dev|they come with python.org and Homebrew builds")
fi
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
    missing+=("Chromium, for the browser test of the Dagster UI|chromium|brew install --cask chromium")
command -v chromedriver >/dev/null || missing+=("chromedriver, for the browser test|chromium-driver|brew install chromedriver")
node_major=$(node --version 2>/dev/null | sed -n 's/^v\([0-9]*\).*/\1/p')
if [ "${node_major:-0}" -lt 20 ] 2>/dev/null; then
    missing+=("Node.js 20 or newer (now: ${node_major:-none}), for Azurite, the Azure Blob emulator|nodejs|brew install node")
fi
command -v npm >/dev/null || missing+=("npm, which installs Azurite|npm|it comes with Node.js")

if [ "${1:-}" = "--apt" ]; then
    for item in "${missing[@]}"; do IFS='|' read -r _ package _ <<<"$item"; echo "$package"; done
    exit 0
fi
if [ ${#missing[@]} -eq 0 ]; then
    echo "prerequisites: all present (Python 3.11+, make, Java ${java_major}, cc, Python.h, chromium, chromedriver, node ${node_major}, npm)"
    exit 0
fi
echo "make test needs these, which are missing:" >&2
packages=()
for item in "${missing[@]}"; do
    IFS='|' read -r what package other <<<"$item"
    echo "  - $what  (Debian/Ubuntu: $package; otherwise: $other)" >&2
    packages+=("$package")
done
echo "On Debian/Ubuntu: sudo apt-get install -y ${packages[*]}" >&2
exit 1
