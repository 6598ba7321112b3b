#!/usr/bin/env bash
# Runs what CI runs (make test) plus the format check and the sanitizer build.
set -euo pipefail
cd "$(dirname "$0")/.."
make format-check
make test
make asan
