#!/usr/bin/env bash
# Runs what CI runs (make test) plus the format check, the sanitizer builds (ASan + UBSan
# on every suite, TSan on the actors and integration suites), the full residue soak and
# the fuzz targets for 60 s each (the full 10-million-execution runs are `make fuzz`).
set -euo pipefail
cd "$(dirname "$0")/.."
make format-check
make test
make asan
make tsan
make soak
make fuzz FUZZ_TIME=60
