#!/usr/bin/env bash
# Runs the given test command; on failure, repeats what failed at the end of
# the output, where a CI log's tail is read.
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
    echo "==== what failed ===="
    grep -E -A4 "recorded an issue|error: |XCTAssert|Fatal error" "$log" | head -150
fi
exit "$rc"
