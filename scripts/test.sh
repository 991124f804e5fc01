#!/usr/bin/env bash
# Runs every test: the Swift suites (unit, model-level, property and end-to-end over loopback,
# built with warnings as errors) and then schemathesis against a live navd with openapi.yaml.
# Nothing reaches the internet: the fact service is a loopback stub or a closed port.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

swift test -Xswiftc -warnings-as-errors
# What people deploy is the release build: its signals and shutdown are tested too.
swift build -c release --product navd -Xswiftc -warnings-as-errors
NAVD_BINARY="$(swift build -c release --show-bin-path)/navd" swift test --skip-build -Xswiftc -warnings-as-errors --filter ProcessTests
scripts/schemathesis.sh .build/debug/navd
