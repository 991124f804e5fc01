#!/usr/bin/env bash
# Brings deploy/compose.yaml up for real (PostgreSQL, three navd built from the Dockerfile, nginx
# on port 8080) and checks it end to end through nginx on 127.0.0.1:8080 with
# scripts/compose_check.py: a counter session, its actions and its event stream survive SIGKILL
# of the navd container that holds it, then of the one that took it over, and the session moves
# back to the first when both are started again (and nginx reloaded: they come back with new
# addresses). Then `down -v` and the navd containers' anonymous volumes, on failure too. Not part
# of the test command: it builds images (minutes when nothing is cached; about 20 s to 1.5 min
# once they are).
#
#   scripts/compose-check.sh [--standins]
#
# Images: PostgreSQL and nginx are compose.yaml's official images when they are in the local
# store; with --standins, or when they are not, the stand-ins from deploy/standins/ (Debian's
# postgresql-15 and nginx on debian:bookworm-slim) are built and named with NAVD_POSTGRES_IMAGE /
# NAVD_NGINX_IMAGE, for machines that cannot reach docker.io (nothing is pulled). Either
# variable, when set, is used as it is. navd's image is compose.yaml's (localhost/navd:latest),
# built from the Dockerfile, or reused when localhost/navd:src-<hash of the build inputs at HEAD>
# exists and those inputs are committed. The bases (debian:bookworm-slim, swift:6.3-bookworm)
# must be in the local store: scripts/verify-container.sh builds them without a registry.
# Images stay cached; containers, the network and volumes do not.
#
# Engine: `docker compose` when a Docker engine answers, else podman-compose ($PODMAN_COMPOSE, on
# PATH, or podman-compose 1.6.0 installed with pip into ${TMPDIR:-/tmp}/navd-podman-compose).
# With podman, as verify-container.sh does: runc, and nofile no higher than `ulimit -Hn`; and when
# podman's network backend is CNI without its dnsname plugin (services could not find each other
# by name), netavark with aardvark-dns instead, installed with apt-get when missing (root only).
# Builds run with --network host: only apt-get reaches out, and a netavark default network can
# collide with CNI's on such hosts. Podman runs no health checks by itself without systemd, and
# podman-compose ignores `condition: service_healthy` before podman 4.6: this script starts
# PostgreSQL first and waits for its health check, pins the MAC address of the network's bridge
# (as root; why, where it does), then starts the rest. Every wait is bounded (the
# checks at 10 minutes; see compose_check.py for why its waits are generous).
# NAVD_COMPOSE_CHECK_KEEP=1 leaves the topology up (and skips `down -v`) for a look afterwards.
set -Eeuo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD

project=navd-compose-check
compose_file=$repo/deploy/compose.yaml
port=8080
standins=0
for argument in "$@"; do
  case $argument in
    --standins) standins=1 ;;
    -h|--help) sed -n '2,/^set -E/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "compose-check: unknown argument $argument (see --help)" >&2; exit 2 ;;
  esac
done

work=$(mktemp -d "${TMPDIR:-/tmp}/navd-compose-check.XXXXXX")
passed=0
brought_up=0
# shellcheck source=container/steps.sh
. scripts/container/steps.sh
die() { printf '\ncompose-check: FAIL: %s\n' "$*" >&2; exit 1; }

# Runs a long command in the background and waits for it, so that INT or TERM reach the trap at
# once (bash runs a trap only after its foreground command), which stops it in cleanup.
child=
interruptible() {
  "$@" &
  child=$!
  local status=0
  wait "$child" || status=$?
  child=
  return "$status"
}

# The container of a compose service, by the labels both compose tools set.
container_of() {
  "$engine" ps -a --filter "label=com.docker.compose.project=$project" \
    --filter "label=com.docker.compose.service=$1" --format '{{.Names}}' | head -1
}

# The anonymous volumes of the project's containers (navd's image declares one for
# /var/lib/navd), into `anonymous`: podman-compose's `down -v` leaves them.
anonymous_volumes() {
  anonymous=()
  local name volume
  for name in $("$engine" ps -aq --filter "label=com.docker.compose.project=$project" 2>/dev/null); do
    for volume in $("$engine" inspect -f '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}' "$name" 2>/dev/null); do
      [[ $volume == "${project}_"* ]] || anonymous+=("$volume")
    done
  done
}

# `down -v`, then whatever it left: containers by the project's label, its volumes, its network.
remove_project() {
  anonymous_volumes
  timeout 120 "${compose_cmd[@]}" -p "$project" -f "$compose_file" down -v -t 10 >"$work/down.log" 2>&1 \
    || { tail -20 "$work/down.log" >&2; echo "compose-check: down -v failed (above)" >&2; }
  local leftover
  leftover=$("$engine" ps -aq --filter "label=com.docker.compose.project=$project" 2>/dev/null || true)
  [[ -z $leftover ]] || "$engine" rm -f $leftover >/dev/null 2>&1 || true
  "$engine" volume rm -f "${project}_postgres-data" "${anonymous[@]}" >/dev/null 2>&1 || true
  "$engine" network rm -f "${project}_default" >/dev/null 2>&1 || true
}

cleanup() {
  local status=$?
  trap - EXIT ERR INT TERM
  if [[ -n $child ]]; then kill "$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; fi
  if [[ $brought_up == 1 ]]; then
    if [[ $passed != 1 ]]; then
      for service in postgres navd1 navd2 navd3 nginx; do
        name=$(container_of "$service" 2>/dev/null) || continue
        [[ -n $name ]] || continue
        echo "--- last lines of $service ($name) ---" >&2
        timeout 30 "$engine" logs "$name" 2>&1 | grep -v '"path":"/healthz"' | tail -n 25 | cut -c1-300 >&2 || true
      done
    fi
    if [[ ${NAVD_COMPOSE_CHECK_KEEP:-0} == 1 ]]; then
      anonymous_volumes
      echo "compose-check: left up; to remove it:${CONTAINERS_CONF:+ CONTAINERS_CONF=$CONTAINERS_CONF} ${compose_cmd[*]} -p $project -f $compose_file down -v${anonymous[*]:+ && $engine volume rm ${anonymous[*]}}" >&2
      exit "$status"
    fi
    step "down -v"
    remove_project
    left=()
    [[ -z $("$engine" ps -aq --filter "label=com.docker.compose.project=$project" 2>/dev/null) ]] || left+=(containers)
    ! "$engine" network inspect "${project}_default" >/dev/null 2>&1 || left+=("network ${project}_default")
    for volume in "${project}_postgres-data" "${anonymous[@]}"; do
      ! "$engine" volume inspect "$volume" >/dev/null 2>&1 || left+=("volume $volume")
    done
    if ((${#left[@]})); then
      echo "compose-check: left behind: ${left[*]}" >&2
    else
      ok "no container, network or volume of $project left (${#anonymous[@]} anonymous volumes removed)"
    fi
  fi
  rm -rf "$work"
  print_timings
  if [[ $passed == 1 ]]; then echo "compose-check: PASS" >&2; else echo "compose-check: FAILED (exit $status)" >&2; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'die "line $LINENO: \`$BASH_COMMAND\` failed"' ERR

step "engine"
if [[ -n ${PODMAN_COMPOSE:-} ]]; then
  engine=podman
  read -ra compose_cmd <<<"$PODMAN_COMPOSE"
elif command -v docker >/dev/null && timeout 10 docker info >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; then
  engine=docker
  compose_cmd=(docker compose)
else
  command -v podman >/dev/null || die "neither a Docker engine nor podman (apt-get install podman)"
  engine=podman
  if command -v podman-compose >/dev/null; then
    compose_cmd=(podman-compose)
  else
    venv=${TMPDIR:-/tmp}/navd-podman-compose
    if [[ ! -x $venv/bin/podman-compose ]]; then
      log "installing podman-compose with pip into $venv"
      { python3 -m venv "$venv" && "$venv/bin/pip" install -q podman-compose==1.6.0; } >"$work/pip.log" 2>&1 \
        || { tail -20 "$work/pip.log" >&2; die "pip install podman-compose failed"; }
    fi
    compose_cmd=("$venv/bin/podman-compose")
  fi
fi
if [[ $engine == podman ]]; then
  hard_nofile=$(ulimit -Hn)
  if [[ $hard_nofile == unlimited ]] || ((hard_nofile > 65536)); then nofile=65536; else nofile=$hard_nofile; fi
  sed "s/@NOFILE@/$nofile/g" scripts/container/containers.conf.in >"$work/containers.conf"
  backend=$(CONTAINERS_CONF=$work/containers.conf podman info --format '{{.Host.NetworkBackend}}')
  # any_file PATH...: one of them exists.
  any_file() { local path; for path; do [[ -e $path ]] && return 0; done; return 1; }
  if [[ $backend == cni ]] && ! any_file /usr/{lib,libexec,local/lib}/cni/dnsname /opt/cni/bin/dnsname; then
    if ! any_file /usr/{lib,libexec}/podman/netavark || ! any_file /usr/{lib,libexec}/podman/aardvark-dns; then
      [[ $(id -u) == 0 ]] || die "podman's CNI has no dnsname plugin and netavark/aardvark-dns are missing: install them as root"
      log "installing netavark aardvark-dns with apt-get (CNI here has no dnsname plugin)"
      { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends netavark aardvark-dns; } \
        >"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log" >&2; die "apt-get install netavark aardvark-dns failed"; }
    fi
    printf '\n[network]\nnetwork_backend = "netavark"\n' >>"$work/containers.conf"
    backend="netavark (CNI here has no dnsname plugin)"
  fi
  export CONTAINERS_CONF=$work/containers.conf
  ok "$(podman --version), $("${compose_cmd[@]}" --version 2>/dev/null | grep -i compose | head -1), runtime runc, nofile $nofile, network $backend"
  build_flags=(--pull=never --network host --format docker)
else
  ok "$(docker compose version)"
  build_flags=(--network host)
fi
# What an earlier run, killed before its trap ran, may have left.
remove_project 2>/dev/null
if python3 -c 'import socket, sys; s = socket.socket(); s.settimeout(1); sys.exit(s.connect_ex(("127.0.0.1", int(sys.argv[1]))) != 0)' "$port"; then
  die "something already listens on 127.0.0.1:$port, where compose.yaml publishes nginx"
fi

step "images: PostgreSQL and nginx"
default_image() { sed -n "s/.*\${$1:-\([^}]*\)}.*/\1/p" "$compose_file" | head -1; }
for pair in postgres:NAVD_POSTGRES_IMAGE nginx:NAVD_NGINX_IMAGE; do
  service=${pair%%:*} variable=${pair#*:}
  official=$(default_image "$variable")
  [[ -n $official ]] || die "compose.yaml no longer reads \${$variable:-…} for $service"
  if [[ -n ${!variable:-} ]]; then
    ok "$service: ${!variable} (from $variable)"
  elif [[ $standins == 0 ]] && "$engine" image inspect "$official" >/dev/null 2>&1; then
    ok "$service: $official (official, in the local store)"
  else
    [[ $standins == 1 ]] || log "$official is not in the local store: using the stand-in (pull it to check the official image)"
    standin=localhost/navd-standin-$service:latest
    start=$SECONDS
    interruptible "$engine" build "${build_flags[@]}" -f "deploy/standins/$service.Containerfile" -t "$standin" deploy/standins \
      >"$work/build-$service.log" 2>&1 || { tail -30 "$work/build-$service.log" >&2; die "building the $service stand-in failed"; }
    export "$variable=$standin"
    ok "$service: $standin, the stand-in, built in $((SECONDS - start)) s"
  fi
done

step "image: navd"
navd_image=$(sed -n 's/^ *image: *\(localhost\/navd:[^ ]*\)$/\1/p' "$compose_file" | head -1)
[[ -n $navd_image ]] || die "compose.yaml no longer names navd's image localhost/navd:…"
inputs=(Dockerfile .dockerignore Package.swift openapi.yaml Sources Tests)
key=$(git ls-tree -r HEAD -- "${inputs[@]}" | git hash-object --stdin | cut -c1-12)
cached=localhost/navd:src-$key
if [[ -z $(git status --porcelain -- "${inputs[@]}") ]] && "$engine" image inspect "$cached" >/dev/null 2>&1; then
  "$engine" tag "$cached" "$navd_image"
  ok "reused $cached (built from these sources), tagged $navd_image"
else
  [[ -z $(git status --porcelain -- "${inputs[@]}") ]] || { cached=; log "uncommitted changes in the build inputs: building, not tagging src-$key"; }
  log "building $navd_image from the Dockerfile (a release build of navd: minutes when not cached)"
  start=$SECONDS
  tags=(-t "$navd_image")
  [[ -z $cached ]] || tags+=(-t "$cached")
  interruptible "$engine" build "${build_flags[@]}" --label "org.opencontainers.image.revision=$(git rev-parse HEAD)" \
    -f Dockerfile "${tags[@]}" . >"$work/build-navd.log" 2>&1 \
    || { tail -40 "$work/build-navd.log" >&2; die "building navd's image failed (is swift:6.3-bookworm in the local store? scripts/verify-container.sh builds it)"; }
  ok "built $navd_image${cached:+ and $cached} in $((SECONDS - start)) s"
fi

# healthy SERVICE SECONDS: the container's own health check passes within SECONDS.
healthy() {
  local name deadline=$((SECONDS + $2))
  name=$(container_of "$1")
  [[ -n $name ]] || die "no container for service $1"
  while ((SECONDS < deadline)); do
    if [[ $engine == podman ]]; then
      podman healthcheck run "$name" >/dev/null 2>&1 && return 0
    else
      [[ $(docker inspect -f '{{.State.Health.Status}}' "$name" 2>/dev/null) == healthy ]] && return 0
    fi
    sleep 1
  done
  die "$1 ($name) was not healthy within $2 s"
}

step "up: PostgreSQL"
brought_up=1
timeout 120 "${compose_cmd[@]}" -p "$project" -f "$compose_file" up -d postgres >"$work/up.log" 2>&1 \
  || { tail -30 "$work/up.log" >&2; die "compose up -d postgres failed"; }
healthy postgres 60
ok "$(container_of postgres) healthy (pg_isready, compose.yaml's health check)"
# A Linux bridge with no address of its own takes the lowest of its ports' MACs, so the network's
# gateway changes its MAC as containers join. A container that cached the old one loses what it
# sends to the gateway, aardvark-dns's lookups of the other services included, until it probes
# its neighbour entry again: a navd loading a session then waits up to ~45 s to resolve
# `postgres` (seen with netavark 1.4). An address set explicitly stays put, so pin it now, while
# only PostgreSQL is on the network.
if [[ $engine == podman && $(id -u) == 0 ]] && command -v ip >/dev/null; then
  bridge=$(podman network inspect "${project}_default" --format '{{.NetworkInterface}}' 2>/dev/null || true)
  if [[ -n $bridge && -r /sys/class/net/$bridge/address ]]; then
    mac=$(<"/sys/class/net/$bridge/address")
    ip link set dev "$bridge" address "$mac" && ok "pinned the MAC address of the network's bridge $bridge ($mac)"
  fi
fi

step "up: navd1 navd2 navd3 nginx"
timeout 180 "${compose_cmd[@]}" -p "$project" -f "$compose_file" up -d >>"$work/up.log" 2>&1 \
  || { tail -30 "$work/up.log" >&2; die "compose up -d failed"; }
containers=()
for service in navd1 navd2 navd3; do
  healthy "$service" 60
  containers+=(--container "$service=$(container_of "$service")")
done
ok "navd1 navd2 navd3 healthy (navd --check-health, the image's health check)"
deadline=$((SECONDS + 60))
until python3 -c 'import sys, urllib.request; sys.exit(urllib.request.urlopen(sys.argv[1], timeout=2).status != 200)' \
  "http://127.0.0.1:$port/readyz" 2>/dev/null; do
  ((SECONDS < deadline)) || die "GET http://127.0.0.1:$port/readyz through nginx did not answer 200 within 60 s"
  sleep 1
done
ok "GET /readyz through nginx on 127.0.0.1:$port -> 200"
"$engine" ps --filter "label=com.docker.compose.project=$project" --format '    {{.Names}}  {{.Image}}  {{.Status}}' >&2

step "checks through nginx (scripts/compose_check.py)"
interruptible timeout -k 10 600 python3 scripts/compose_check.py --engine "$engine" --port "$port" "${containers[@]}" \
  --nginx "$(container_of nginx)" \
  || die "the checks through nginx failed (above)"
passed=1
