#!/bin/sh
# Runs one client scenario of the official MCP conformance suite against `troupe mcp
# client`:  conformance.sh SCENARIO /path/to/troupe
# The suite (@modelcontextprotocol/conformance, pinned in package.json) needs Node.js 22,
# which the npm package `node` provides here (node_modules/node/bin/node); the system's
# Node is not used. `make test` installs both (npm ci, the Makefile's npm-deps target).
# Exit 77 (ctest: skipped) when they are not installed; the suite's own exit code
# otherwise: non-zero on any FAILURE or WARNING, a timeout, or a client that failed.
set -u
scenario="$1"
troupe="$2"
here="$(cd "$(dirname "$0")" && pwd)"
node="$here/node_modules/node/bin/node"
suite="$here/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [ ! -x "$node" ] || [ ! -f "$suite" ]; then
  echo "SKIPPED: the MCP conformance suite or Node 22 is not installed in $here/node_modules" \
       "(run make npm-deps, or npm ci --prefix tests/mcp)"
  exit 77
fi
out="$(mktemp -d "${TMPDIR:-/tmp}/troupe-mcp-conformance-XXXXXX")"
trap 'rm -rf "$out"' EXIT
"$node" "$suite" client --command "$troupe mcp client" --scenario "$scenario" -o "$out"
code=$?
# The checks the suite recorded, for the log.
for f in "$out"/*/checks.json; do
  [ -f "$f" ] && "$node" -e '
    const checks = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    for (const c of checks) if (c.status !== "INFO")
      console.log(`${c.status.padEnd(8)} ${c.id}${c.errorMessage ? ": " + c.errorMessage : ""}`);
  ' "$f"
done
exit $code
