#!/usr/bin/env bash
# Writes RELIABILITY.md from the suites' own output: the fault suite's
# report, the hostile-client, timeout, security and reliability tests as
# `swift test` reports them, and the last fuzz run's summary (.build/fuzz-report.md,
# if any). Run as root after `make build`; or, to reuse a `make test` run,
#   scripts/reliability-report.sh --from LOG FAULTS_REPORT [OUT]
# with that run's output and its .build/faults-report.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/.build/${CONFIG:-debug}
if [ "${1:-}" = "--from" ]; then
  log=$2; faults=$3; out=${4:-RELIABILITY.md}
else
  out=${1:-RELIABILITY.md}
  faults=.build/faults-report.md
  log=.build/reliability-tests.log
  tests/faults/run.py --bin "$bin" --report "$faults" >/dev/null
  BUSYMATE_BIN_DIR=$bin swift test --skip-build \
    --filter 'HostileClientTests|WebFrontHostileTests|TimeoutTests|SecurityTests|ReliabilityTests|ClientTimeoutStateTests' > "$log" 2>&1 || true
fi
names='HostileClientTests|WebFrontHostileTests|TimeoutTests|SecurityTests|ReliabilityTests|ClientTimeoutStateTests'
tests=$(grep -lE "struct ($names)" Tests/*/*.swift | xargs grep -hoE 'func [a-zA-Z0-9]+\(\)' | sed -E 's/func ([a-zA-Z0-9]+)\(\)/\1/' | sort -u)
# The round-2 section (issue 21) is written by hand from each item's before
# and after; it is carried over from the RELIABILITY.md in the tree.
round2=$(sed -n '/^<!-- round 2 -->$/,/^<!-- \/round 2 -->$/p' RELIABILITY.md 2>/dev/null || true)
{
  echo "# Reliability"
  echo
  echo "What was run against Busymate from outside, and what held. The round-2 table"
  echo "is written by hand from each item's probe and test; every figure after it is"
  echo "copied from the suites' own output by \`scripts/reliability-report.sh\`"
  echo "(commit $(git rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores)."
  echo
  if [ -n "$round2" ]; then
    echo "$round2"
    echo
  fi
  sed -e '1s/^# Fault suite/## The fault suite (`make test-faults`)/' -e 's/^## /### /' -e '1s/^### /## /' "$faults"
  echo
  echo "## Hostile clients, timeouts, security (\`swift test\`)"
  echo
  echo "End-to-end tests with the real binaries (\`Tests/IntegrationTests\`), and the client clock's state"
  echo "machine tested without a channel; each name says what it asserts."
  echo
  for t in $tests; do
    line=$(grep -E "^(✔|✘) Test $t\(\) (passed|failed)" "$log" | head -1 || true)
    [ -n "$line" ] || continue
    echo "$line" | sed -E 's/\(\) (passed|failed) after ([0-9.]+) seconds.*/ — \1 (\2 s)/; s/^✔ Test /- ✔ /; s/^✘ Test /- ✘ /'
  done
  if [ -f .build/fuzz-report.md ]; then
    echo
    cat .build/fuzz-report.md
  fi
} > "$out"
echo "wrote $out"
