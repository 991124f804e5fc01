#!/usr/bin/env bash
# Starts navd from source: installs the system libraries it links if missing, then runs the
# release build. Arguments go to navd (see `scripts/serve.sh --help`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/system-packages.sh
exec swift run -c release navd "$@"
