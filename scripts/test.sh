#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs every test.
# Tests that need ../shared (real data and models) skip with a message when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
ATTUNE_TEST_PACKAGES="python3-pytest chromium" bash scripts/setup.sh
ctest --preset default "$@"
