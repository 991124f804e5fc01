#!/usr/bin/env bash
# navd under ThreadSanitizer: builds navd with -sanitize=thread, then drives that binary with the
# crash test (clients on counter, app and wifi sessions, stream subscribers, kill -9 and restarts
# on one data directory; a round on the Dispatch backend too) and the process tests (SIGTERM,
# restarts, resumes, limits, stores), and fails on any race ThreadSanitizer reports. The event
# loops, their executors, the store's writer, stream fan-out and shutdown hand work between
# threads by locks and atomics only; this is what holds them to it.
#
#   scripts/race-test.sh [rounds]     (crash-test rounds, default 4; about 90 s on 2 cores, half
#                                      of it the build)
#
# The build is of a copy of the sources in .build/race, made afresh each run (a copy built on
# top of an older one can mix modules built with and without the file below), with
# scripts/race/Mutex.swift in every module: see that file for why. Reports are kept in
# .build/race/reports. The process tests are the debug build's (`swift build --build-tests`
# first); the one that measures memory given back to the system is skipped, since
# ThreadSanitizer's allocator keeps it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

rounds=${1:-4}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [rounds]" >&2; exit 2; }
root=$PWD/.build/race
mkdir -p "$root"

# The sources as they are (tracked or new, not ignored).
rm -rf "$root/src" "$root/build"
mkdir -p "$root/src"
git ls-files -z --cached --others --exclude-standard -- Package.swift openapi.yaml Sources Tests \
  | tar --null -T - -cf - | tar -xf - -C "$root/src"
for module in "$root"/src/Sources/*/; do
  if grep -rqs --include='*.swift' 'withLock' "$module"; then cp scripts/race/Mutex.swift "$module/RaceTestMutex.swift"; fi
done
swift build --package-path "$root/src" --scratch-path "$root/build" --product navd --sanitize=thread
navd="$(swift build --package-path "$root/src" --scratch-path "$root/build" --show-bin-path)/navd"

reports=$root/reports
rm -rf "$reports"
mkdir -p "$reports"
# io_sync=0: a write to a descriptor and a read of it (an eventfd's wake-up) order nothing, so a
# hand-off that leans on a wake-up alone, without a lock or an atomic, is reported too.
export TSAN_OPTIONS="halt_on_error=0 exitcode=0 io_sync=0 history_size=4 log_path=$reports/tsan"

NAVD_BINARY=$navd scripts/crash-test.sh "$rounds"
# The Dispatch backend hands readiness over from libdispatch's threads: a round of its own.
NAVD_IO=dispatch NAVD_BINARY=$navd scripts/crash-test.sh 1
NAVD_BINARY=$navd swift test --skip-build --disable-xctest --filter ProcessTests \
  --skip theMemoryOfEndedSessionsReturnsToTheSystem

found=$(find "$reports" -type f | wc -l)
if (( found > 0 )); then
  cat "$reports"/* | head -200
  echo "race-test: ThreadSanitizer reported in $found process(es); every report is in $reports" >&2
  exit 1
fi
echo "race-test: no race reported ($rounds crash-test rounds, one on the Dispatch backend, the process tests)"
