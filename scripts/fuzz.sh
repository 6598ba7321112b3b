#!/usr/bin/env bash
# Runs the libFuzzer targets of fuzz/ one after another (fuzz/README.md), each either for
# a number of executions (default 10 million) or for a number of seconds, or to whichever
# of the two comes first when both are given.
#   scripts/fuzz.sh [--runs N] [--time SECONDS] [TARGET...]
# Builds nothing: `make fuzz` builds the preset first. Every target starts from its
# committed seeds (fuzz/corpus/TARGET, never written to) plus what earlier runs found
# (build/fuzz/run/TARGET/corpus). A crash, leak or timeout stops the script with the
# failing input saved in build/fuzz/run/TARGET/ and a non-zero exit.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=""
seconds=""
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --time) seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/*_fuzz.cpp; do
    f=${f#fuzz/}
    targets+=("${f%_fuzz.cpp}")
  done
fi

# Longest input per target: a few times the largest seed, enough for every structure the
# parser knows while keeping each execution short.
max_len() {
  case "$1" in
    openai_stream|anthropic_stream) echo 8192 ;;
    argument_validator) echo 2048 ;;
    *) echo 4096 ;;
  esac
}

root="$PWD"
bin_dir="$root/build/fuzz/fuzz"
status=0
printf '%-20s %12s %8s %9s %7s %7s\n' target executions seconds exec/s cov ft
for t in "${targets[@]}"; do
  bin="$bin_dir/${t}_fuzz"
  if [ ! -x "$bin" ]; then
    echo "$t: $bin is missing (make fuzz builds it)" >&2
    status=1
    continue
  fi
  run_dir="$root/build/fuzz/run/$t"
  mkdir -p "$run_dir/corpus"
  rm -f "$run_dir"/fuzz-*.log
  limit=()
  [ -z "$runs" ] || limit+=(-runs="$runs")
  [ -z "$seconds" ] || limit+=(-max_total_time="$seconds")
  [ ${#limit[@]} -gt 0 ] || limit=(-runs=10000000)
  start=$(date +%s.%N)
  # -jobs=1: one fuzzing process (libFuzzer logs it to fuzz-0.log); nice: the machine is shared.
  # -timeout is wall-clock: at nice 19 beside builds a unit that takes 0.2 ms of CPU once
  # waited 13 s for its turn (5 December), so a hang is a unit still running after 60 s.
  set +e
  (cd "$run_dir" && nice -n 19 "$bin" -jobs=1 "${limit[@]}" -max_len="$(max_len "$t")" \
     -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$run_dir/" \
     corpus "$root/fuzz/corpus/$t" >/dev/null 2>&1)
  rc=$?
  set -e
  end=$(date +%s.%N)
  log="$run_dir/fuzz-0.log"
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
  execs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
  cov=$(grep -oE 'cov: [0-9]+' <<<"$done_line" | grep -oE '[0-9]+' || echo "?")
  ft=$(grep -oE 'ft: [0-9]+' <<<"$done_line" | grep -oE '[0-9]+' || echo "?")
  elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }')
  rate=$(awk -v n="$execs" -v s="$elapsed" 'BEGIN { if (s > 0 && n ~ /^[0-9]+$/) printf "%.0f", n / s; else print "?" }')
  printf '%-20s %12s %8s %9s %7s %7s\n' "$t" "$execs" "$elapsed" "$rate" "$cov" "$ft"
  if [ "$rc" -ne 0 ] || grep -qE '^==[0-9]+==ERROR|^SUMMARY: |deadly signal|ERROR: libFuzzer' "$log"; then
    echo "$t FAILED (exit $rc); the log is $log:" >&2
    grep -E 'ERROR|SUMMARY|Test unit written|artifact' "$log" | head -20 >&2 || true
    status=1
    break
  fi
done
exit $status
