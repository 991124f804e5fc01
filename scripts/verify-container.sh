#!/usr/bin/env bash
# Builds the repo's Dockerfile, unchanged, with podman (no Docker engine needed) and checks
# the image end to end: runtime libraries, no toolchain or sources, non-root user, health,
# readiness, metrics, a counter session that fetches a fact from a loopback stub, a clean
# stop on SIGTERM, the session on a new container on the volume, a backup on SIGUSR1, and the
# image size.
#
#   scripts/verify-container.sh [CONTEXT_DIR]     (CONTEXT_DIR defaults to the repo root)
#
# Base images: if docker.io/library/debian:bookworm-slim or docker.io/library/swift:6.3-bookworm
# is missing from podman's store, it is built locally (no registry needed): Debian with
# debootstrap from the mirror apt is configured with, Swift from the host's toolchain (the
# directory two levels above `swift` on PATH, or $SWIFT_TOOLCHAIN). They stay cached; set
# NAVD_VERIFY_REBUILD_BASE=1 to rebuild them. Run it as root: it installs podman, runc and
# debootstrap with apt-get when one is missing, and debootstrap needs root. Expect about
# 5 minutes cold; with the bases cached, the time of a release build of navd (about a minute
# on 2 cores); with the image cached too, about 10 s. On a shared machine, run it under
# `nice -n 19`: podman build and the containers inherit the niceness.
#
# Environment: NAVD_VERIFY_IMAGE (tag to build, default navd:verify), NAVD_VERIFY_MAX_MB (size
# limit, default 100, as podman counts it: uncompressed layer tars, a few MB more than Docker's
# figure), SWIFT_TOOLCHAIN, DEBIAN_MIRROR / DEBIAN_SECURITY_MIRROR (override the mirrors read
# from apt's sources), NAVD_VERIFY_REBUILD_BASE=1, NAVD_VERIFY_NO_CACHE=1 (build the Dockerfile
# with --no-cache: a cold build of navd's image on cached base images).
set -Eeuo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
context=$(cd "${1:-$repo_root}" && pwd) || { echo "FAIL: no such context directory: ${1:-}" >&2; exit 1; }
dockerfile=$repo_root/Dockerfile
ignorefile=$repo_root/.dockerignore
image=${NAVD_VERIFY_IMAGE:-navd:verify}
debian_image=docker.io/library/debian:bookworm-slim
swift_image=docker.io/library/swift:6.3-bookworm
swift_short=swift:6.3-bookworm
max_mb=${NAVD_VERIFY_MAX_MB:-100}
max_stop_seconds=5

container=navd-verify-$$
volume=navd-verify-data-$$
work=
stub_pid=
passed=0
# shellcheck source=container/steps.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/container/steps.sh"
die() { printf '\nFAIL: %s\n' "$*" >&2; exit 1; }

unmount_under() { # unmount anything debootstrap may have left mounted below $1
    local mounts
    mounts=$(awk -v root="$1/" 'index($2, root) == 1 { print $2 }' /proc/mounts | sort -r)
    for m in $mounts; do umount -l "$m" 2>/dev/null || true; done
}

cleanup() {
    local status=$?
    trap - EXIT ERR INT TERM
    if podman container exists "$container" 2>/dev/null; then
        if [[ $passed != 1 ]]; then
            echo "--- last lines of the container's log ---" >&2
            podman logs --tail 40 "$container" >&2 2>&1 || true
        fi
        podman rm -f "$container" >/dev/null 2>&1 || true
    fi
    podman volume rm -f "$volume" >/dev/null 2>&1 || true
    if [[ -n $stub_pid ]]; then kill "$stub_pid" 2>/dev/null || true; wait "$stub_pid" 2>/dev/null || true; fi
    if [[ -n $work && -d $work ]]; then
        unmount_under "$work"
        rm -rf --one-file-system "$work"
    fi
    print_timings
    if [[ $passed == 1 ]]; then echo "PASS: $image ($context)" >&2; else echo "FAILED (exit $status)" >&2; fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'die "line $LINENO: \`$BASH_COMMAND\` failed"' ERR

[[ -f $dockerfile ]] || die "no Dockerfile at $dockerfile"
[[ -f $context/Package.swift ]] || die "$context has no Package.swift: not a SwiftPM package"
command -v python3 >/dev/null || die "python3 is needed for the checks"
work=$(mktemp -d "${TMPDIR:-/tmp}/navd-verify.XXXXXX")

step "tools: podman, runc, debootstrap"
if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! command -v debootstrap >/dev/null; then
    [[ $(id -u) == 0 ]] || die "podman, runc and debootstrap are missing; run as root or install them"
    log "installing podman runc debootstrap with apt-get"
    apt-get update -q >"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log" >&2; die "apt-get update failed"; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends podman runc debootstrap \
        >>"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log" >&2; die "apt-get install podman runc debootstrap failed"; }
fi
ok "$(podman --version), $(runc --version | head -1)"

# podman's defaults fail here: crun on cgroups, default ulimits above the hard limit.
hard_nofile=$(ulimit -Hn)
if [[ $hard_nofile == unlimited ]] || ((hard_nofile > 65536)); then nofile=65536; else nofile=$hard_nofile; fi
sed "s/@NOFILE@/$nofile/g" "$repo_root/scripts/container/containers.conf.in" >"$work/containers.conf"
export CONTAINERS_CONF=$work/containers.conf
ok "CONTAINERS_CONF: runtime runc, nofile $nofile"

# Prints the Debian mirror and the security mirror apt is configured with (one per line,
# the second may be empty), from one-line and deb822 sources.
apt_mirrors() {
    python3 - <<'PY'
import glob, re
main, security = [], []
def add(uris, suites):
    for uri in uris:
        if "bookworm" in suites: main.append(uri)
        if "bookworm-security" in suites: security.append(uri)
for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")):
    try: lines = open(path).read().splitlines()
    except OSError: continue
    for line in lines:
        line = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
        if len(line) >= 3 and line[0] == "deb": add([line[1]], [line[2]])
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    try: text = open(path).read()
    except OSError: continue
    for stanza in re.split(r"\n\s*\n", text):
        fields, key = {}, None
        for line in stanza.splitlines():
            if line.startswith("#") or not line.strip(): continue
            if line[0].isspace() and key: fields[key] += " " + line.strip(); continue
            key, _, value = line.partition(":"); key = key.strip().lower(); fields[key] = value.strip()
        if fields.get("enabled", "yes").lower() == "no" or "deb" not in fields.get("types", "").split(): continue
        add(fields.get("uris", "").split(), fields.get("suites", "").split())
print(main[0].rstrip("/") if main else "")
print(security[0].rstrip("/") if security else "")
PY
}

step "base image $debian_image"
if [[ ${NAVD_VERIFY_REBUILD_BASE:-0} != 1 ]] && podman image exists "$debian_image"; then
    ok "cached"
else
    { read -r mirror; read -r security_mirror; } < <(apt_mirrors; echo)
    mirror=${DEBIAN_MIRROR:-$mirror}
    security_mirror=${DEBIAN_SECURITY_MIRROR:-$security_mirror}
    [[ -n $mirror ]] || die "found no bookworm mirror in /etc/apt/sources.list{,.d/*}; set DEBIAN_MIRROR"
    log "debootstrap --variant=minbase bookworm from $mirror"
    rootfs=$work/rootfs
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
        || { tail -30 "$work/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
    unmount_under "$rootfs"
    # Trim it like the official slim image: no docs, man pages or locales, now or later.
    cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
    find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "$rootfs"/usr/share/{man,groff,info,lintian,linda,locale}/*
    cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
    echo 'Acquire::Languages "none";' >"$rootfs/etc/apt/apt.conf.d/docker-no-languages"
    rm -f "$rootfs/etc/apt/sources.list"
    {
        printf 'Types: deb\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: main\n' "$mirror"
        printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
        if [[ -n $security_mirror ]]; then
            printf '\nTypes: deb\nURIs: %s\nSuites: bookworm-security\nComponents: main\n' "$security_mirror"
            printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
        fi
    } >"$rootfs/etc/apt/sources.list.d/debian.sources"
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
        "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/* "$rootfs"/tmp/*
    tar --numeric-owner -C "$rootfs" -c . \
        | podman import --quiet --change 'CMD ["bash"]' \
            --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            - "$debian_image" >/dev/null
    rm -rf --one-file-system "$rootfs"
    ok "imported ($(podman image inspect --format '{{.Size}}' "$debian_image" | awk '{printf "%.1f MB", $1 / 1e6}'))"
fi

step "base image $swift_image"
if [[ ${NAVD_VERIFY_REBUILD_BASE:-0} != 1 ]] && podman image exists "$swift_image"; then
    ok "cached"
else
    if [[ -n ${SWIFT_TOOLCHAIN:-} ]]; then
        toolchain=$SWIFT_TOOLCHAIN
    else
        swift_bin=$(command -v swift) || die "no swift on PATH; set SWIFT_TOOLCHAIN to the directory holding bin/swift"
        toolchain=$(dirname "$(dirname "$(readlink -f "$swift_bin")")")
    fi
    toolchain=$(cd "$toolchain" && pwd)
    [[ -x $toolchain/bin/swift-frontend && -d $toolchain/lib/swift_static ]] \
        || die "$toolchain is not a Swift toolchain with static libraries (bin/swift-frontend, lib/swift_static)"
    [[ $toolchain != /usr ]] || die "swift lives in /usr; refusing to copy all of /usr. Set SWIFT_TOOLCHAIN"
    version=$("$toolchain/bin/swift" --version 2>&1 | head -1)
    [[ $version == *"version 6.3"* ]] || die "the toolchain at $toolchain is not Swift 6.3: $version"
    log "copying $toolchain ($version) into $swift_image"
    podman build --pull=never --format docker --build-context "swift=$toolchain" \
        -f "$repo_root/scripts/container/swift-build.Dockerfile" \
        -t "$swift_short" -t "$swift_image" "$repo_root/scripts/container" >"$work/swift-base.log" 2>&1 \
        || { tail -30 "$work/swift-base.log" >&2; die "building $swift_image failed (log above)"; }
    ok "built ($(podman image inspect --format '{{.Size}}' "$swift_image" | awk '{printf "%.0f MB", $1 / 1e6}'))"
fi
# FROM swift:6.3-bookworm may resolve to either name; make sure both exist.
podman image exists "$swift_short" || podman tag "$swift_image" "$swift_short"

step "podman build $dockerfile (context $context)"
# --format docker keeps HEALTHCHECK (the OCI format has no place for it).
build_flags=(--pull=never --format docker)
[[ ${NAVD_VERIFY_NO_CACHE:-0} != 1 ]] || build_flags+=(--no-cache)
if ! podman build "${build_flags[@]}" -f "$dockerfile" --ignorefile "$ignorefile" -t "$image" "$context" 2>&1 \
    | tee "$work/build.log" | { grep --line-buffered -E '(^|\] )(STEP|COMMIT)|Building for|Build of product|error:' >&2 || true; }; then
    tail -40 "$work/build.log" >&2
    die "podman build failed (log above)"
fi
podman image exists "$image" || die "podman build did not produce $image"

step "image contents and configuration"
ldd_out=$(podman run --rm --no-healthcheck --network none --entrypoint /usr/bin/ldd "$image" /usr/local/bin/navd) \
    || die "ldd /usr/local/bin/navd failed in the image: $ldd_out"
printf '%s\n' "$ldd_out" | sed 's/^/      /' >&2
! grep -q 'not found' <<<"$ldd_out" || die "navd needs libraries the runtime image lacks: $(grep 'not found' <<<"$ldd_out")"
if grep -q 'libcurl\.so' <<<"$ldd_out"; then ok "libcurl linked dynamically and present"; else ok "navd does not link libcurl"; fi
ok "every shared library navd needs is in the image"
podman run --rm --no-healthcheck --network none --entrypoint /bin/sh "$image" -c \
    'for p in swift swiftc swift-frontend clang; do command -v $p && exit 1; done; test ! -e /src && test ! -e /usr/lib/swift' \
    || die "the runtime image carries a Swift toolchain or /src"
ok "no toolchain, no sources"
config_user=$(podman image inspect --format '{{.Config.User}}' "$image")
[[ -n $config_user && ${config_user%%:*} != 0 && ${config_user%%:*} != root ]] \
    || die "image runs as root (Config.User='$config_user')"
ok "Config.User=$config_user"
[[ $(podman image inspect --format '{{.Config.StopSignal}}' "$image") == SIGTERM ]] || die "STOPSIGNAL is not SIGTERM"
healthcheck=$(podman image inspect --format '{{if .Config.Healthcheck}}{{.Config.Healthcheck.Test}}{{end}}' "$image")
[[ $healthcheck == *--check-health* ]] || die "no HEALTHCHECK running navd --check-health (got '$healthcheck')"
ok "STOPSIGNAL SIGTERM, HEALTHCHECK $healthcheck"

step "run the container against a loopback fact stub"
# The fact stub: GET /<n> answers "<n> is a stub number." on a free loopback port.
python3 -c '
import http.server, sys
class Stub(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = (self.path.strip("/") + " is a stub number.").encode()
        self.send_response(200); self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *args): pass
server = http.server.HTTPServer(("127.0.0.1", 0), Stub)
open(sys.argv[1] + ".tmp", "w").write(str(server.server_address[1])); __import__("os").rename(sys.argv[1] + ".tmp", sys.argv[1])
server.serve_forever()' "$work/stub.port" &
stub_pid=$!
for _ in $(seq 50); do [[ -s $work/stub.port ]] && break; sleep 0.1; done
[[ -s $work/stub.port ]] || die "the fact stub did not start"
stub_port=$(<"$work/stub.port")
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
ok "fact stub on 127.0.0.1:$stub_port, navd on 127.0.0.1:$port"
# --health-interval=disable: keep the image's HEALTHCHECK for `podman healthcheck run` below,
# without podman asking systemd (absent in containers such as this one) for a timer.
# The sessions' volume: a named volume starts as a copy of the image's /var/lib/navd (owned by
# navd's uid), and outlives the container.
podman volume create "$volume" >/dev/null
start_container() {
    podman run -d --name "$container" --network host --health-interval=disable \
        -v "$volume:/var/lib/navd" \
        -e "PORT=$port" -e NAVD_HOST=127.0.0.1 -e "FACT_BASE_URL=http://127.0.0.1:$stub_port" \
        "$image" >/dev/null 2>>"$work/podman.log" || { cat "$work/podman.log" >&2; die "podman run $image failed"; }
    local up=0 deadline=$(($(date +%s) + 30))
    while (($(date +%s) < deadline)); do
        [[ $(podman inspect -f '{{.State.Running}}' "$container") == true ]] \
            || die "the container exited (code $(podman inspect -f '{{.State.ExitCode}}' "$container")) before /healthz answered"
        if python3 -c 'import sys, urllib.request; sys.exit(urllib.request.urlopen(sys.argv[1], timeout=1).status != 200)' \
            "$base/healthz" 2>/dev/null; then up=1; break; fi
        sleep 0.2
    done
    [[ $up == 1 ]] || die "GET /healthz did not answer 200 within 30 s"
}
base=http://127.0.0.1:$port
start_container
ok "listening"

step "HTTP checks"
python3 - "$base" "$work/session.json" <<'PY' || die "the HTTP checks failed (above)"
import json, sys, urllib.error, urllib.request

base = sys.argv[1]

def fail(message):
    print(f"\nFAIL: {message}", file=sys.stderr)
    sys.exit(1)

def call(method, path, body=None, token=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read()
    except OSError as error:
        fail(f"{method} {path}: {error}")

def expect(method, path, status, body=None, token=None):
    got, content_type, payload = call(method, path, body, token)
    if got != status:
        fail(f"{method} {path}: expected {status}, got {got}: {payload[:500]!r}")
    print(f"    ok: {method} {path} -> {got}", file=sys.stderr)
    return content_type, payload

def as_json(method, path, payload, *keys):
    try:
        value = json.loads(payload)
    except ValueError:
        fail(f"{method} {path}: body is not JSON: {payload[:500]!r}")
    missing = [key for key in keys if not isinstance(value, dict) or key not in value]
    if missing:
        fail(f"{method} {path}: no {', '.join(missing)} in {payload[:500]!r}")
    return value

expect("GET", "/healthz", 200)
expect("GET", "/readyz", 200)
content_type, payload = expect("GET", "/metrics", 200)
if not content_type.startswith("text/plain"):
    fail(f"GET /metrics: Content-Type is {content_type!r}, not text/plain")
if not any(line.startswith("# TYPE ") for line in payload.decode("utf-8", "replace").splitlines()):
    fail("GET /metrics: no '# TYPE' line in the exposition")

_, payload = expect("POST", "/sessions", 201, {"feature": "counter"})
session = as_json("POST", "/sessions", payload, "id", "token")
sid, token = session["id"], session["token"]
actions = f"/sessions/{sid}/actions"
_, payload = expect("POST", actions, 200, {"target": "root", "action": "incrementButtonTapped", "args": {}}, token)
as_json("POST", actions, payload, "version", "events")
_, payload = expect("POST", actions + "?wait=true", 200, {"target": "root", "action": "factButtonTapped", "args": {}}, token)
as_json("POST", actions, payload, "version", "events")
_, payload = expect("GET", f"/sessions/{sid}/navigation", 200, token=token)
tree = as_json("GET", "/navigation", payload)

def nodes(node):
    yield node
    for child in node.get("presentations", []) or []:
        yield from nodes(child)
    for stack in node.get("stacks", []) or []:
        for element in stack.get("elements", []) or []:
            yield from nodes(element)

wanted = "1 is a stub number."
facts = [n for n in nodes(tree) if n is not tree and n.get("feature") == "fact"]
if not any((n.get("state") or {}).get("value") == wanted for n in facts):
    fail(f"GET /sessions/{{id}}/navigation: no presentation of feature 'fact' with state.value {wanted!r}:\n"
         + json.dumps(tree, indent=1)[:2000])
print(f"    ok: the counter presents the fact {wanted!r} fetched from the stub", file=sys.stderr)
_, payload = expect("GET", f"/sessions/{sid}", 200, token=token)
json.dump({"id": sid, "token": token, "session": json.loads(payload), "tree": tree}, open(sys.argv[2], "w"))
PY

step "health check, user, stop on SIGTERM"
health=$(podman healthcheck run "$container" 2>>"$work/podman.log") \
    || die "the image's HEALTHCHECK (navd --check-health) failed: ${health:-$(tail -3 "$work/podman.log")}"
ok "HEALTHCHECK: ${health:-healthy}"
uid=$(podman exec "$container" id -u) || die "podman exec id -u failed"
[[ $uid != 0 ]] || die "navd runs as root in the container"
ok "runs as uid $uid"
stop_start=$(now)
podman stop -t 10 "$container" >/dev/null 2>>"$work/podman.log"
stop_seconds=$(seconds_since "$stop_start")
exit_code=$(podman inspect -f '{{.State.ExitCode}}' "$container")
hint=
if [[ $exit_code == 137 ]]; then hint=": SIGKILL, when podman stop's 10 s ran out"; fi
python3 -c 'import sys; sys.exit(float(sys.argv[1]) >= float(sys.argv[2]))' "$stop_seconds" "$max_stop_seconds" \
    || die "podman stop took ${stop_seconds}s (limit ${max_stop_seconds}s): navd does not end promptly on SIGTERM (exit code $exit_code$hint)"
if [[ $exit_code != 0 ]]; then
    if ((exit_code > 128 && exit_code < 160)); then
        # 132 (SIGILL) and 133 (SIGTRAP) are how a Swift runtime trap ends a process: fatalError,
        # a failed precondition, overflow, or a dynamic actor-isolation check.
        die "navd was killed by signal $((exit_code - 128)) (SIG$(kill -l $((exit_code - 128)))) while stopping on SIGTERM (exit code $exit_code, not 0)"
    fi
    die "navd exited with code $exit_code on SIGTERM, not 0"
fi
ok "stopped in ${stop_seconds}s with exit code 0"

step "a new container on the same volume keeps the session"
podman rm -f "$container" >/dev/null 2>>"$work/podman.log"
start_container
python3 - "$base" "$work/session.json" <<'PY' || die "the session did not survive the restart (above)"
import json, sys, urllib.error, urllib.request

base, saved = sys.argv[1], json.load(open(sys.argv[2]))
sid, token = saved["id"], saved["token"]

def call(method, path, body=None, headers=()):
    request = urllib.request.Request(base + path, data=None if body is None else json.dumps(body).encode(), method=method)
    request.add_header("Authorization", "Bearer " + token)
    if body is not None:
        request.add_header("Content-Type", "application/json")
    for name, value in headers:
        request.add_header(name, value)
    return urllib.request.urlopen(request, timeout=30)

def fail(message):
    print(f"\nFAIL: {message}", file=sys.stderr)
    sys.exit(1)

try:
    session = json.load(call("GET", f"/sessions/{sid}"))
    tree = json.load(call("GET", f"/sessions/{sid}/navigation"))
except urllib.error.HTTPError as error:
    fail(f"GET /sessions/{sid} after the restart: {error.code} {error.read()[:300]!r}")
if session != saved["session"]:
    fail(f"the state changed across the restart: {saved['session']} became {session}")
if tree != saved["tree"]:
    fail("the navigation tree changed across the restart")
print("    ok: same version, state and tree in the new container", file=sys.stderr)
answer = json.load(call("POST", f"/sessions/{sid}/actions", {"target": "root", "action": "incrementButtonTapped"}))
new_ids = [event["id"] for event in answer["events"]]
resume_from = new_ids[0] - 1
stream = call("GET", f"/sessions/{sid}/events", headers=[("Last-Event-ID", str(resume_from - 1))])
ids, kinds = [], []
for raw in stream:
    line = raw.decode().rstrip("\n")
    if line.startswith("id: "):
        ids.append(int(line[4:]))
    if line.startswith("event: "):
        kinds.append(line[7:])
    if ids and ids[-1] == new_ids[-1]:
        break
if ids != [resume_from] + new_ids or "snapshot" in kinds or "end" in kinds:
    fail(f"resuming after {resume_from - 1} gave ids {ids} ({kinds}), expected {[resume_from] + new_ids}")
print(f"    ok: the stream resumes after event {resume_from - 1} with exactly {ids}", file=sys.stderr)
PY
ok "the session, its tree and its stream survive a new container on the volume"

step "SIGUSR1 writes a copy of the store onto the volume"
podman kill --signal USR1 "$container" >/dev/null 2>>"$work/podman.log" || die "podman kill --signal USR1 failed"
line=
for _ in $(seq 50); do
    line=$(podman logs "$container" 2>/dev/null | grep '"event":"backup_written"' | tail -1) && break
    sleep 0.2
done
[[ -n $line ]] || die "no backup_written line after SIGUSR1: $(podman logs --tail 5 "$container" 2>&1)"
copy=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["path"])' "$line")
[[ $copy == /var/lib/navd/backups/navd-*.sqlite3 ]] || die "the copy is at $copy, not on the volume"
mode=$(podman exec "$container" stat -c %a "$copy") || die "$copy is not in the container"
[[ $mode == 600 ]] || die "$copy has mode $mode, not 600"
ok "SIGUSR1: $copy, mode 600, on the volume"
podman stop -t 10 "$container" >/dev/null 2>>"$work/podman.log"

step "image size"
size=$(podman image inspect --format '{{.Size}}' "$image")
size_mb=$(awk -v s="$size" 'BEGIN { printf "%.1f", s / 1e6 }')
binary_mb=$(podman run --rm --no-healthcheck --network none --entrypoint /bin/sh "$image" -c 'stat -c %s /usr/local/bin/navd' | awk '{ printf "%.1f", $1 / 1e6 }')
# The layers that hold files, oldest first: the base image, the apt layer, the binary.
podman history --format '{{.Size}}\t{{.CreatedBy}}' "$image" | awk -F'\t' '$1 != "0 B"' | tac \
    | cut -c1-100 | sed 's/^/      /' >&2
echo "    $image: $size_mb MB (navd binary $binary_mb MB; limit $max_mb MB)" >&2
awk -v s="$size" -v max="$max_mb" 'BEGIN { exit !(s / 1e6 < max) }' || die "$image is $size_mb MB, not under $max_mb MB"

passed=1
