#!/usr/bin/env bash
# Writes RELIABILITY.md from the suites' own output: the fault suite's
# report, the hostile-client, timeout, security and reliability tests as
# `swift test` reports them, and the last fuzz run's summary, if any.
# Run as root after `make build` (and `make fuzz` for the fuzz part).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/.build/${CONFIG:-debug}
out=${1:-RELIABILITY.md}
tests/faults/run.py --bin "$bin" --report .build/faults-report.md >/dev/null
BUSYMATE_BIN_DIR=$bin swift test --skip-build \
  --filter 'HostileClientTests|TimeoutTests|SecurityTests|ReliabilityTests|ClientTimeoutStateTests' 2>&1 \
  | grep -E '^(✔|✘) Test [a-zA-Z]' | sed -E 's/\(\) (passed|failed) after ([0-9.]+) seconds.*/ — \1 (\2 s)/; s/^✔ Test /- ✔ /; s/^✘ Test /- ✘ /' \
  > .build/hostile-report.txt || true
{
  echo "# Reliability"
  echo
  echo "What was run against Busymate from outside, and what held. Every figure below"
  echo "is copied from the suites' own output by \`scripts/reliability-report.sh\`"
  echo "(commit $(git rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores)."
  echo
  sed -e '1s/^# Fault suite/## The fault suite (`make test-faults`)/' -e 's/^## /### /' -e '1s/^### /## /' .build/faults-report.md
  echo
  echo "## Hostile clients, timeouts, security (\`swift test\`)"
  echo
  echo "Each is an end-to-end test with the real binaries (\`Tests/IntegrationTests\`), or a state"
  echo "machine tested without a channel; names say what each asserts."
  echo
  sort .build/hostile-report.txt
  if [ -f .build/fuzz-report.md ]; then
    echo
    cat .build/fuzz-report.md
  fi
} > "$out"
echo "wrote $out"
