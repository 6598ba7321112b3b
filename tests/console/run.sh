#!/bin/sh
# ctest's entry to the console's browser tests: skipped (77), never passed, when Node,
# playwright-core (npm ci in tests/console, done by `make test`) or Debian's chromium is
# missing; otherwise the test's own exit code.
#   run.sh /path/to/troupe <output dir> [--screenshots <dir>]
here=$(dirname "$0")
command -v node >/dev/null 2>&1 || { echo "SKIP: node is not installed (make deps installs nodejs)"; exit 77; }
[ -d "$here/node_modules/playwright-core" ] || {
  echo "SKIP: playwright-core is not installed in tests/console (make npm-deps runs npm ci there)"; exit 77; }
[ -x "${TROUPE_CHROMIUM:-/usr/bin/chromium}" ] || {
  echo "SKIP: ${TROUPE_CHROMIUM:-/usr/bin/chromium} is missing (make deps installs Debian's chromium)"; exit 77; }
exec node "$here/console_test.mjs" "$@"
