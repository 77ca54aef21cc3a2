#!/usr/bin/env bash
# Installs every Debian 12 package attune needs (see the README's dependency table),
# then configures and builds with the default preset (Ninja, ccache, RelWithDebInfo).
#   scripts/setup.sh            install + build
#   scripts/setup.sh --no-build install only
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  nlohmann-json3-dev libcli11-dev libsqlite3-dev sqlite3
  libgtest-dev libgmock-dev libbenchmark-dev
  libpcre2-dev libicu-dev libtorch-dev libopenblas0-openmp libblas-dev
  libcpp-httplib-dev libssl-dev
  libfaiss-dev
  libgit2-dev
  libpq-dev postgresql
)
# scripts/test.sh adds what only the tests need (python3-pytest for python/, chromium for
# the report's rendering check).
read -r -a extra <<<"${ATTUNE_TEST_PACKAGES:-}"
PACKAGES+=("${extra[@]}")

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "${1:-}" = "--no-build" ]; then exit 0; fi

# Two cores: keep ccache warm between builds (CI reuses the machine's cache when it can).
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
cmake --preset default >/dev/null
cmake --build --preset default
