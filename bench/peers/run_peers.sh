#!/usr/bin/env bash
# Runs the `agent` scenario (bench/peers/README.md) on each JS peer at concurrency 1, 100 and
# 1000 against one troupe mock-llm, and writes bench/peers/results/<peer>-c<N>.json.
#
#   bench/peers/run_peers.sh                  # all peers, default run counts
#   PEERS="langgraph" RUNS_C1000=2000 bench/peers/run_peers.sh
#
# Environment:
#   TROUPE       troupe binary (default: build/release/bin/troupe in the repository)
#   PEERS        peers to run, in order (default: "baseline openai-agents langgraph openclaw";
#                baseline is the framework-free reference, see the README; openclaw runs the
#                one-round task through its gateway, see openclaw/README.md)
#   CONCURRENCY  concurrency levels (default: "1 100 1000")
#   RUNS_C1, RUNS_C100, RUNS_C1000, RUNS_C<N>   runs per level (default 200 / 2000 / 5000;
#                other levels default to 10 x N)
#   WARMUP       sequential warm-up runs per process, not recorded (default 20)
#   OPENCLAW_CONCURRENCY  OpenClaw's levels (default "1 8"); OPENCLAW_RUNS_C<N> its runs per
#                level (default 60 at 1, 20 x N otherwise); OPENCLAW_WARMUP (default 5)
#   RESULTS      output directory (default: bench/peers/results)
# The peers' packages must be installed first: npm ci --prefix bench/peers/<peer>
# (make bench-peers does both).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
TROUPE="${TROUPE:-$root/build/release/bin/troupe}"
PEERS="${PEERS:-baseline openai-agents langgraph openclaw}"
CONCURRENCY="${CONCURRENCY:-1 100 1000}"
WARMUP="${WARMUP:-20}"
RESULTS="${RESULTS:-$here/results}"

if [[ ! -x "$TROUPE" ]]; then
  echo "run_peers.sh: no troupe binary at $TROUPE (build it, or set TROUPE)" >&2
  exit 2
fi
for peer in $PEERS; do
  if [[ -f "$here/$peer/package.json" && ! -d "$here/$peer/node_modules" ]]; then
    echo "run_peers.sh: $peer has no node_modules: make bench-peers-install (or npm ci --prefix bench/peers/$peer)" >&2
    exit 2
  fi
done
if [[ " $PEERS " == *" openclaw "* && ! -x "$here/openclaw/runtime/node_modules/.bin/node" ]]; then
  echo "run_peers.sh: openclaw has no Node 24: make bench-peers-install" >&2
  exit 2
fi
mkdir -p "$RESULTS"

mock_out="$(mktemp)"
mock_pid=""
cleanup() {
  if [[ -n "$mock_pid" ]]; then
    kill "$mock_pid" 2>/dev/null || true
    wait "$mock_pid" 2>/dev/null || true
  fi
  rm -f "$mock_out"
}
trap cleanup EXIT

"$TROUPE" mock-llm --listen 127.0.0.1:0 --script "$here/agent_scenario.jsonl" >"$mock_out" 2>&1 &
mock_pid=$!
origin=""
for _ in $(seq 100); do
  origin="$(grep -o 'listening on http://[^ ]*' "$mock_out" | head -1 | sed 's/^listening on //')" || true
  [[ -n "$origin" ]] && break
  if ! kill -0 "$mock_pid" 2>/dev/null; then
    echo "run_peers.sh: mock-llm exited:" >&2
    cat "$mock_out" >&2
    exit 1
  fi
  sleep 0.1
done
if [[ -z "$origin" ]]; then
  echo "run_peers.sh: mock-llm printed no address:" >&2
  cat "$mock_out" >&2
  exit 1
fi
echo "mock-llm (pid $mock_pid) at $origin, script bench/peers/agent_scenario.jsonl"
echo "node $(node --version), $(nproc) cores"

status=0
for peer in $PEERS; do
  if [[ "$peer" == openclaw ]]; then
    # One gateway per level, the one-round task (openclaw/README.md).
    for c in ${OPENCLAW_CONCURRENCY:-1 8}; do
      var="OPENCLAW_RUNS_C$c"
      if [[ "$c" == 1 ]]; then def=60; else def=$((20 * c)); fi
      runs="${!var:-$def}"
      out="$RESULTS/openclaw-one-round-c$c.json"
      echo "== openclaw (one-round) c=$c runs=$runs  (loadavg $(cat /proc/loadavg))"
      if ! (cd "$here/openclaw" && node run.mjs --base-url "$origin/v1" --concurrency "$c" \
            --runs "$runs" --warmup "${OPENCLAW_WARMUP:-5}" --json "$out"); then
        echo "run_peers.sh: openclaw c=$c failed" >&2
        status=1
      fi
    done
    continue
  fi
  for c in $CONCURRENCY; do
    var="RUNS_C$c"
    case "$c" in
      1) def=200 ;;
      100) def=2000 ;;
      1000) def=5000 ;;
      *) def=$((10 * c)) ;;
    esac
    runs="${!var:-$def}"
    out="$RESULTS/$peer-c$c.json"
    echo "== $peer c=$c runs=$runs  ($(uptime | sed 's/.*load average/load average/'))"
    if ! (cd "$here/$peer" && node --expose-gc run.mjs --base-url "$origin/v1" \
          --concurrency "$c" --runs "$runs" --warmup "$WARMUP" --json "$out"); then
      echo "run_peers.sh: $peer c=$c failed" >&2
      status=1
    fi
  done
done
echo "mock-llm stats: $(curl -s "$origin/_mock/stats" || echo unavailable)"
node "$here/summarize.mjs" "$RESULTS"
exit $status
