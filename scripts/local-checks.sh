#!/usr/bin/env bash
# Runs what CI runs (make test) plus the format check, the sanitizer build and the fuzz
# targets for 60 s each (the full 10-million-execution runs are `make fuzz`).
set -euo pipefail
cd "$(dirname "$0")/.."
make format-check
make test
make asan
make fuzz FUZZ_TIME=60
