#!/usr/bin/env bash
# Installs the Debian packages navd builds against when any is missing: the system libraries
# reached through system-library targets (SQLite for the session store, libpq for the PostgreSQL
# store, OpenSSL's libcrypto for token hashes, libcurl for the fact service). With --test, also
# what the test command uses: postgresql (the tests start a private server of their own),
# prometheus (for promtool), Node.js (the JavaScript client's tests), Chromium and its
# driver (the inspector's browser tests). Called by scripts/serve.sh and scripts/test.sh
# (--test); a no-op when everything is there.
set -euo pipefail
packages=(libsqlite3-dev libpq-dev libssl-dev libcurl4-openssl-dev pkg-config)
if [[ ${1:-} == --test ]]; then packages+=(postgresql prometheus nodejs chromium chromium-driver); fi
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing ${missing[*]}" >&2
as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "FAIL: ${missing[*]} missing and no sudo; install them as root" >&2; exit 1; }
  as_root=(sudo)
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
{ "${as_root[@]}" apt-get update -q && DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; } \
  >"$log" 2>&1 || { tail -20 "$log" >&2; echo "FAIL: apt-get install ${missing[*]}" >&2; exit 1; }
# The prometheus package is here only for promtool: on a host with systemd it would also start
# a Prometheus server, which the tests neither need nor want.
if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null; then
  "${as_root[@]}" systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
# Likewise the postgresql package's own cluster: the tests start a private one on loopback.
if [[ " ${missing[*]} " == *" postgresql "* ]] && command -v systemctl >/dev/null; then
  "${as_root[@]}" systemctl disable --now postgresql >/dev/null 2>&1 || true
fi
