#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer of what reads untrusted bytes: the request-head scanner
# and parser, the chunked body decoder, the JSON parser, and the state decoder of every hostable
# feature (harnesses in Fuzz/, one file each, seeds in Fuzz/Corpus/<harness>/).
#
#   scripts/fuzz.sh [seconds] [harness ...]   (default 15 s for each of: RequestHead ChunkedBody JSON FeatureState)
#   FUZZ_RUNS=10000000 scripts/fuzz.sh 2700   (a long run: each stops at 10 million inputs or 45 minutes)
#   .build/fuzz/bin/<harness> FILE            (runs one input again, e.g. a crash the script kept)
#
# SwiftPM cannot build a libFuzzer target, so swiftc does it directly, one module at a time, from
# the production sources: NavigationCore, HTTP (with its C shim) and Features are compiled with
# -sanitize=fuzzer,address (coverage, AddressSanitizer, -O with assertions kept) and
# -enable-testing; each harness is linked against them and `@testable import`s what it needs.
# Nothing is copied: the harness calls the code navd runs.
#
# Fails on any crash, trap, assertion, leak, hang (an input running over 120 s: generous, since
# the leak check after an input that adds coverage stops every thread of the harness, and on a
# busy shared machine that has taken a minute) or memory over -rss_limit_mb;
# the input that did it is kept as .build/fuzz/artifacts/<harness>-crash-… with libFuzzer's
# report above it. Every run starts from the committed seeds, which it only reads; the inputs it
# finds go to .build/fuzz/corpus/<harness>/, emptied first. (Starting from a grown corpus would
# make the start unbounded: libFuzzer runs every input once, with a leak check per input that
# adds coverage, before the time limit applies.) Prints, per harness, the inputs run, the
# coverage at the end (libFuzzer's cov: edges and ft: features) and the slowest input, and ends
# with one line: "fuzz: N harnesses, N inputs, 0 crashes".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

all_harnesses=(RequestHead ChunkedBody JSON FeatureState)
seconds=${1:-15}
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [seconds] [harness ...]" >&2; exit 2; }
shift $(( $# > 0 ? 1 : 0 ))
harnesses=("$@")
(( ${#harnesses[@]} )) || harnesses=("${all_harnesses[@]}")
runs=${FUZZ_RUNS:--1}

out=.build/fuzz
modules=$out/modules
mkdir -p "$modules" "$out/bin" "$out/artifacts"

# Every module is compiled as SwiftPM compiles it (Swift 6, the package's upcoming feature), plus
# the fuzzer's instrumentation. A crash must report at once, not after a backtrace.
export SWIFT_BACKTRACE=enable=no
swift_flags=(-swift-version 6 -package-name navd -enable-upcoming-feature NonisolatedNonsendingByDefault
  -sanitize=fuzzer,address -O -assert-config Debug -g -enable-testing -parse-as-library
  -I "$modules" -Xcc -fmodule-map-file="$modules/CNavdSystem.modulemap"
  -Xcc -fmodule-map-file=Sources/CCurl/module.modulemap)

# The C shim, with a module map naming its header (SwiftPM makes one for C targets).
printf 'module CNavdSystem {\n  header "%s/Sources/CNavdSystem/include/CNavdSystem.h"\n  export *\n}\n' "$PWD" \
  > "$modules/CNavdSystem.modulemap"

# Something is rebuilt only when its inputs changed: a hash of the flags and the sources.
fresh() {
  local target=$1; shift
  local key
  key=$({ printf '%s\n' "${swift_flags[@]}"; cat "$@"; } | sha256sum)
  [[ -f $target && -f $target.key && $(cat "$target.key") == "$key" ]] && return 0
  printf '%s' "$key" > "$target.key.new"
  return 1
}
built() { mv "$1.key.new" "$1.key"; }

# A module is compiled after the modules it imports (named after it), and again when they change.
build_module() {
  local name=$1; shift
  local sources=() dependency keys=()
  mapfile -t sources < <(find "Sources/$name" -name '*.swift' | sort)
  for dependency in "$@"; do keys+=("$out/$dependency.o.key"); done
  local object=$out/$name.o
  fresh "$object" "${sources[@]}" "${keys[@]}" && return
  echo "fuzz: compiling $name"
  nice swiftc "${swift_flags[@]}" -module-name "$name" -wmo -c "${sources[@]}" \
    -emit-module -emit-module-path "$modules/$name.swiftmodule" -o "$object"
  built "$object"
}
if ! fresh "$out/CNavdSystem.o" Sources/CNavdSystem/shim.c Sources/CNavdSystem/include/CNavdSystem.h; then
  clang -c -O1 -g -fsanitize=fuzzer-no-link,address -I Sources/CNavdSystem/include \
    Sources/CNavdSystem/shim.c -o "$out/CNavdSystem.o"
  built "$out/CNavdSystem.o"
fi
build_module NavigationCore
build_module HTTP CNavdSystem
build_module Features NavigationCore

objects=("$out/CNavdSystem.o" "$out/NavigationCore.o" "$out/HTTP.o" "$out/Features.o")
for harness in "${harnesses[@]}"; do
  [[ -f Fuzz/$harness.swift ]] || { echo "fuzz: no harness Fuzz/$harness.swift" >&2; exit 2; }
  binary=$out/bin/$harness
  fresh "$binary" "Fuzz/$harness.swift" "${objects[@]}" && continue
  echo "fuzz: linking $harness"
  nice swiftc "${swift_flags[@]}" -module-name "${harness}Fuzzer" "Fuzz/$harness.swift" "${objects[@]}" \
    -lcurl -o "$binary" 2> >(grep -v "Cannot export local symbol '__asan" >&2)
  built "$binary"
done

total=0
for harness in "${harnesses[@]}"; do
  corpus=$out/corpus/$harness
  rm -rf "$corpus"
  mkdir -p "$corpus"
  log=$out/$harness.log
  dictionary=()
  [[ -f Fuzz/$harness.dict ]] && dictionary=(-dict="Fuzz/$harness.dict")
  echo "fuzz: $harness for ${seconds}s"
  status=0
  # Inputs up to 4 KiB (past every limit the harnesses set), 2 GiB of memory, 120 s per input.
  nice -n 10 "$out/bin/$harness" -max_total_time="$seconds" -runs="$runs" -max_len=4096 \
    -rss_limit_mb=2048 -timeout=120 -print_final_stats=1 -artifact_prefix="$out/artifacts/$harness-" \
    "${dictionary[@]}" "$corpus" "Fuzz/Corpus/$harness" > "$log" 2>&1 || status=$?
  if (( status != 0 )); then
    tail -n 60 "$log" >&2
    echo "fuzz: $harness FAILED (exit $status); the input is in $out/artifacts/, the log in $log" >&2
    exit 1
  fi
  units=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  slowest=$(sed -n 's/^stat::slowest_unit_time_sec: *//p' "$log" | tail -n 1)
  coverage=$(grep -E '^#[0-9]+' "$log" | tail -n 1 | grep -oE 'cov: [0-9]+ ft: [0-9]+' || true)
  echo "fuzz: $harness: ${units:-0} inputs, ${coverage:-no coverage line}, slowest input ${slowest:-0} s, corpus $(find "$corpus" -type f | wc -l) files"
  total=$(( total + ${units:-0} ))
done
echo "fuzz: ${#harnesses[@]} harnesses, $total inputs, 0 crashes"
