#!/usr/bin/env bash
# Fails if the Swift sources would not build on Darwin for a reason visible without a Mac:
# an `import Glibc` without its Darwin branch, epoll/eventfd outside the Linux backend files
# (which begin with `#if os(Linux)`), or that backend or accept4 named outside `#if os(Linux)`.
# Prints each offending line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The only files that may speak epoll: the Linux backend.
linux_backend=(
  Sources/HTTP/EpollSelector.swift
)

failed=0
while IFS= read -r file; do
  backend=0
  for allowed in "${linux_backend[@]}"; do [[ "$file" == "$allowed" ]] && backend=1; done
  # A Linux backend file must be compiled on Linux only, and may then import Glibc plainly.
  if (( backend )) && [[ "$(head -n 1 "$file")" != "#if os(Linux)" ]]; then
    echo "$file:1: a Linux backend file must begin with #if os(Linux)"; failed=1
  fi
  awk -v file="$file" -v backend="$backend" '
    { line[NR] = $0 }
    END {
      for (n = 1; n <= NR; n++) {
        if (line[n] ~ /^[ \t]*import[ \t]+Glibc[ \t]*$/ && !backend) {
          if (line[n - 1] !~ /^#if canImport\(Glibc\)$/ || line[n + 1] !~ /^#elseif canImport\(Darwin\)$/ || line[n + 2] !~ /^import Darwin$/) {
            printf "%s:%d: import Glibc without #if canImport(Glibc) … #elseif canImport(Darwin) import Darwin\n", file, n; bad = 1
          }
        }
        # Which #if branches enclose this line: a Linux-only one may name the Linux backend.
        if (line[n] ~ /^[ \t]*#if /) { depth++; linux[depth] = (line[n] ~ /os\(Linux\)/) }
        else if (line[n] ~ /^[ \t]*#(else|elseif)/) { linux[depth] = 0 }
        else if (line[n] ~ /^[ \t]*#endif/) { depth-- }
        guarded = 0
        for (d = 1; d <= depth; d++) if (linux[d]) guarded = 1
        code = line[n]; sub(/\/\/.*/, "", code)
        # epoll itself (its calls, constants and the shims for them) only in the backend
        # file; the backend by name only where Linux alone compiles it. The word "epoll" as a
        # backend choice (`--io epoll`) is neither.
        if (!backend && code ~ /(epoll_|EPOLL|eventfd)/) {
          printf "%s:%d: epoll outside the Linux backend: %s\n", file, n, line[n]; bad = 1
        }
        if (!backend && !guarded && code ~ /EpollSelector/) {
          printf "%s:%d: the epoll backend outside #if os(Linux): %s\n", file, n, line[n]; bad = 1
        }
        # accept4 is Linux-only, but not epoll: either backend may use it where Linux alone compiles.
        if (!backend && !guarded && code ~ /accept4/) {
          printf "%s:%d: accept4 outside #if os(Linux): %s\n", file, n, line[n]; bad = 1
        }
      }
      exit bad
    }' "$file" || failed=1
done < <(find Sources Tests -name '*.swift' | sort)

if (( failed )); then
  echo "portability check failed: see the lines above" >&2
  exit 1
fi
echo "portability check passed"
