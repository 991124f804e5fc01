#!/usr/bin/env bash
# Installs the Debian packages navd builds against when any is missing: the system libraries
# reached through system-library targets (SQLite for the session store, libpq for the PostgreSQL
# store, OpenSSL's libcrypto for token hashes, libcurl for the fact service). With --test, also
# what the test command uses: postgresql (the tests start a private server of their own),
# nginx (the cluster test puts it in front of three nodes), prometheus (for promtool),
# Node.js (the JavaScript client's tests), Chromium and its
# driver (the inspector's browser tests); with --cluster, only postgresql and nginx. Called by
# scripts/serve.sh, scripts/test.sh (--test) and scripts/cluster-test.sh (--cluster); a no-op
# when everything is there.
set -euo pipefail
packages=(libsqlite3-dev libpq-dev libssl-dev libcurl4-openssl-dev pkg-config)
case ${1:-} in
  --test) packages+=(postgresql nginx prometheus nodejs chromium chromium-driver) ;;
  --cluster) packages+=(postgresql nginx) ;;
esac
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
# Likewise the postgresql package's own cluster and nginx's default site: the tests start
# private ones on loopback.
for service in postgresql nginx; do
  if [[ " ${missing[*]} " == *" $service "* ]] && command -v systemctl >/dev/null; then
    "${as_root[@]}" systemctl disable --now "$service" >/dev/null 2>&1 || true
  fi
done
