#!/usr/bin/env bash
# navd under the sanitizers: built once with ThreadSanitizer and once with AddressSanitizer, each
# binary driven by the crash test (clients on counter, app and wifi sessions, stream subscribers,
# kill -9 and restarts on one data directory; a round on the Dispatch backend too) and by the
# process tests (SIGTERM, restarts, resumes, limits, stores). Fails on any report.
#
# The event loops, their executors, the store's writer, stream fan-out and shutdown hand work
# between threads by locks and atomics only; ThreadSanitizer holds them to it. The loops' buffers,
# the scatter-gather writes and the C libraries' bindings work through unsafe pointers;
# AddressSanitizer holds those to their bounds and lifetimes.
#
#   scripts/sanitizer-test.sh [rounds]   (crash-test rounds, default 4; about 3½ minutes on 2
#                                         cores, half of it the builds)
#
# Reports are kept in .build/sanitizers/<sanitizer>/reports. The process tests are the debug
# build's (`swift build --build-tests` first); the one that measures memory given back to the
# system is skipped, since a sanitizer's allocator keeps it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

rounds=${1:-4}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [rounds]" >&2; exit 2; }
root=$PWD/.build/sanitizers

# Drives `navd` (built with the sanitizer named) and fails on any report in `reports`.
exercise() {
  local sanitizer=$1 navd=$2 reports=$3
  NAVD_BINARY=$navd scripts/crash-test.sh "$rounds"
  # The Dispatch backend hands readiness over from libdispatch's threads: a round of its own.
  NAVD_IO=dispatch NAVD_BINARY=$navd scripts/crash-test.sh 1
  # A sanitizer's build runs several times slower: the tests' time bounds stretch by 4, and the
  # suites run one at a time, so that no test's load starves another's navd of the two cores.
  NAVD_BINARY=$navd NAVD_TEST_SLOWDOWN=4 swift test --skip-build --disable-xctest --no-parallel --filter ProcessTests \
    --skip theMemoryOfEndedSessionsReturnsToTheSystem
  local found
  found=$(find "$reports" -type f | wc -l)
  if (( found > 0 )); then
    cat "$reports"/* | head -200
    echo "sanitizer-test: $sanitizer reported in $found process(es); every report is in $reports" >&2
    exit 1
  fi
}

# ThreadSanitizer. Built from a copy of the sources made afresh each run (a copy built on top of
# an older one can mix modules built with and without the file below), with
# scripts/sanitizer/Mutex.swift in every module: see that file for why.
thread=$root/thread
rm -rf "$thread/src" "$thread/build" "$thread/reports"
mkdir -p "$thread/src" "$thread/reports"
git ls-files -z --cached --others --exclude-standard -- Package.swift openapi.yaml Sources Tests \
  | tar --null -T - -cf - | tar -xf - -C "$thread/src"
for module in "$thread"/src/Sources/*/; do
  if grep -rqs --include='*.swift' 'withLock' "$module"; then cp scripts/sanitizer/Mutex.swift "$module/SanitizerMutex.swift"; fi
done
swift build --package-path "$thread/src" --scratch-path "$thread/build" --product navd --sanitize=thread
# io_sync=0: a write to a descriptor and a read of it (an eventfd's wake-up) order nothing, so a
# hand-off that leans on a wake-up alone, without a lock or an atomic, is reported too.
TSAN_OPTIONS="halt_on_error=0 exitcode=0 io_sync=0 history_size=4 log_path=$thread/reports/tsan" \
  exercise ThreadSanitizer "$(swift build --package-path "$thread/src" --scratch-path "$thread/build" --show-bin-path)/navd" "$thread/reports"

# AddressSanitizer, on the sources as they are. Leaks are not checked: the feature catalog's
# screens refer to themselves (a feature that presents its own kind) and live as long as the
# process, so every exit would report them.
address=$root/address
rm -rf "$address/reports"
mkdir -p "$address/reports"
swift build --scratch-path "$address/build" --product navd --sanitize=address
ASAN_OPTIONS="detect_leaks=0 log_path=$address/reports/asan" \
  exercise AddressSanitizer "$(swift build --scratch-path "$address/build" --show-bin-path)/navd" "$address/reports"

echo "sanitizer-test: nothing reported by ThreadSanitizer or AddressSanitizer ($rounds crash-test rounds and one on the Dispatch backend each, the process tests)"
