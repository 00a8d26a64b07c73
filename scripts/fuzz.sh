#!/usr/bin/env bash
# `make fuzz` / `make fuzz-smoke`: builds the harnesses in fuzz/ with
# libFuzzer (swift build --sanitize=fuzzer, release) and runs each for
# FUZZ_SECONDS seconds on a scratch copy of its committed corpus, so the
# corpora in fuzz/corpus/ do not churn. Exits non-zero, naming the input
# that crashed, if any harness crashes. See fuzz/README.md.
#
# Environment:
#   FUZZ_SECONDS   seconds per harness (default 600)
#   FUZZ_TARGETS   harnesses to run, space-separated (default: all)
#   FUZZ_SCRATCH   where runs go (default fuzz/.build/runs; emptied per run)
#   FUZZ_ARGS      extra libFuzzer flags for every harness
#   FUZZ_MERGE=1   merge what the runs found back into fuzz/corpus/ (minimised)
#   SWIFT          the swift driver (default: swift)
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
seconds=${FUZZ_SECONDS:-600}
all="http1 http2 tls-hello settings url-pattern raw-http notification control-message dns filter socks5 grpc websocket"
targets=${FUZZ_TARGETS:-$all}
scratch=${FUZZ_SCRATCH:-fuzz/.build/runs}
build=(--package-path fuzz -c release --sanitize=fuzzer -Xswiftc -enable-testing)

case "$seconds" in ''|*[!0-9]*) echo "fuzz: FUZZ_SECONDS must be a whole number of seconds, not '$seconds'" >&2; exit 2 ;; esac
for target in $targets; do
  case " $all " in *" $target "*) ;; *) echo "fuzz: no harness '$target' (there are: $all)" >&2; exit 2 ;; esac
done

scripts/install-deps.sh
echo "fuzz: building the harnesses (fuzz/, release, -sanitize=fuzzer)" >&2
start=$(date +%s)
"$SWIFT" build "${build[@]}"
bin=$("$SWIFT" build "${build[@]}" --show-bin-path)
echo "fuzz: built in $(($(date +%s) - start)) s" >&2

# Swift's own crash reporter would take the signal before libFuzzer and
# exit without the input being saved.
export SWIFT_BACKTRACE=enable=no

rm -rf "$scratch"
mkdir -p "$scratch"
summary="$scratch/summary.txt"
failed=()
for target in $targets; do
  run="$scratch/$target"
  mkdir -p "$run/corpus" "$run/artifacts"
  # What this harness found before must not come back (fuzz/crashes/README.md).
  if compgen -G "fuzz/crashes/$target/*" >/dev/null; then
    if ! "$bin/fuzz-$target" fuzz/crashes/"$target"/* >"$run/replay.log" 2>&1; then
      echo "$target: an input in fuzz/crashes/$target/ fails again (see $run/replay.log)" | tee -a "$summary"
      grep -E 'FUZZ PROPERTY FAILED|Running:' "$run/replay.log" | tail -2 >&2 || true
      failed+=("$target")
      continue
    fi
  fi
  cp fuzz/corpus/"$target"/* "$run/corpus/"
  flags=(-max_total_time="$seconds" -print_final_stats=1 -timeout=30 -rss_limit_mb=2048 -artifact_prefix="$run/artifacts/")
  if [ -f "fuzz/dict/$target.dict" ]; then flags+=(-dict="fuzz/dict/$target.dict"); fi
  echo "fuzz: $target for ${seconds}s (log: $run/log)" >&2
  status=0
  began=$(date +%s)
  # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
  "$bin/fuzz-$target" "${flags[@]}" ${FUZZ_ARGS:-} "$run/corpus" >"$run/log" 2>&1 || status=$?
  elapsed=$(($(date +%s) - began))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$run/log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$run/log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\) ft: \([0-9]*\) corp: \([^ ]*\).*/cov \1, ft \2, corpus \3/p' <<<"$last")
  # slow-unit-* files are reports, not failures.
  crashes=$(find "$run/artifacts" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
  line="$target: ${elapsed}s, ${execs:-?} execs (${rate:-?}/s), ${cov:-cov ?}, crashes $crashes, exit $status"
  echo "$line" | tee -a "$summary"
  if [ "$status" -ne 0 ] || [ "$crashes" -gt 0 ]; then
    failed+=("$target")
    grep -E 'FUZZ PROPERTY FAILED|ERROR: libFuzzer|Fatal error|SUMMARY' "$run/log" | head -5 >&2 || true
    for artifact in "$run/artifacts"/crash-* "$run/artifacts"/timeout-* "$run/artifacts"/oom-* "$run/artifacts"/leak-*; do
      if [ -e "$artifact" ]; then echo "fuzz: $target crashed on $artifact; reproduce with: $bin/fuzz-$target $artifact" >&2; fi
    done
    if [ "$crashes" -eq 0 ]; then echo "fuzz: $target exited $status without a crash file; see $run/log" >&2; fi
  fi
  if [ "${FUZZ_MERGE:-0}" = 1 ] && [ "$status" -eq 0 ]; then
    "$bin/fuzz-$target" -merge=1 -timeout=30 "fuzz/corpus/$target" "$run/corpus" >"$run/merge.log" 2>&1
    echo "fuzz: merged new inputs of $target into fuzz/corpus/$target" >&2
  fi
done

count=$(wc -w <<<"$targets")
# The counts come last: CI reads the closing line.
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (summary: $summary)" >&2
  echo "fuzz: $((count - ${#failed[@]})) passed, ${#failed[@]} failed"
  exit 1
fi
echo "fuzz: no crashes (summary: $summary)" >&2
echo "fuzz: $count passed, 0 failed"
