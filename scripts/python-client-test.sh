#!/usr/bin/env bash
# Generates a Python client from openapi.yaml with openapi-python-client and drives a live navd
# with its typed models: a session deep-linked through the typed `CreateCounterSession` and
# `CounterState`, an action, the events the answer lists (typed envelopes), and the navigation
# tree read back; then an `app` session whose push shows up as a typed stack element. This is
# what a team generating a client from the document gets, so a schema a generator cannot use
# (a `$ref` beside `properties`, an untyped node) fails here.
#
#   scripts/python-client-test.sh [NAVD_BINARY]     (default .build/debug/navd)
#
# navd runs on a free loopback port with a fact service URL nothing listens on, so no request
# leaves the machine. openapi-python-client is pinned and installed with pip into a virtualenv
# ($NAVD_CLIENT_TOOLS, default .build/openapi-client-tools) unless it already has that version.
# Takes about 10 s once the tools are installed.
set -Eeuo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/navd-lib.sh"

GENERATOR_VERSION=0.29.1

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
navd=${1:-.build/debug/navd}
[[ $navd == /* ]] || navd=$PWD/$navd
[[ -x $navd ]] || { echo "FAIL: no navd binary at $navd (swift build --product navd)" >&2; exit 1; }
cd "$repo_root"

tools=${NAVD_CLIENT_TOOLS:-$repo_root/.build/openapi-client-tools}
work=$(mktemp -d "${TMPDIR:-/tmp}/navd-python-client.XXXXXX")
navd_pid=

cleanup() {
    local status=$?
    stop_navd "$status" "$work/navd.log"
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ $("$tools/bin/openapi-python-client" --version 2>/dev/null) != *" $GENERATOR_VERSION" ]]; then
    echo "installing openapi-python-client $GENERATOR_VERSION into $tools"
    python3 -m venv "$tools" || { echo "FAIL: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
    "$tools/bin/python" -m pip install --quiet --disable-pip-version-check "openapi-python-client==$GENERATOR_VERSION"
fi

echo "== openapi-python-client generate (openapi.yaml)"
# Its formatter (ruff) is installed beside it; the generated code is checked by importing it.
PATH=$tools/bin:$PATH "$tools/bin/openapi-python-client" generate --path openapi.yaml --meta none \
    --output-path "$work/navd_client" >"$work/generate.log" 2>&1 || { cat "$work/generate.log" >&2; exit 1; }

start_navd "$navd" "$work/navd.log" --store memory --connect-delay-ms 0

echo "== the generated client against navd on 127.0.0.1:$port"
PYTHONPATH=$work "$tools/bin/python" - "http://127.0.0.1:$port" <<'PY'
import sys
from navd_client import AuthenticatedClient, Client
from navd_client.api.sessions import create_session, get_navigation, get_session
from navd_client.api.user_actions import send_action
from navd_client.models import (ActionRequest, AppState, CounterState, CreateAppSession, CreateCounterSession,
                                CreatedSession, Error, FeatureName, FeatureNode, MutationResult, PushEnvelope,
                                StateEnvelope)

base = sys.argv[1]
failures = []

def check(condition, message):
    if not condition:
        failures.append(message)
        print("  FAIL:", message)

# A counter session, deep-linked through the typed state model.
created = create_session.sync(client=Client(base_url=base), body=CreateCounterSession(feature="counter", state=CounterState(count=41)))
check(isinstance(created, CreatedSession), f"create: {created!r}")
session = AuthenticatedClient(base_url=base, token=created.token)
check(isinstance(created.navigation, FeatureNode) and created.navigation.feature == FeatureName.COUNTER,
      f"created tree: {created.navigation!r}")

# An action: its answer lists the typed `state` event it caused.
result = send_action.sync(created.id, client=session, body=ActionRequest(action="incrementButtonTapped"))
check(isinstance(result, MutationResult) and result.version == 1, f"action: {result!r}")
states = [event for event in result.events if isinstance(event, StateEnvelope)]
check(len(states) == 1 and states[0].data.feature == "root" and states[0].data.changes["count"] == 42,
      f"action events: {result.events!r}")

# The tree, read back: the root node's own state.
tree = get_navigation.sync(created.id, client=session)
check(isinstance(tree, FeatureNode) and tree.id == "root" and tree.state["count"] == 42, f"navigation: {tree!r}")
check(tree.presentations == [] and tree.stacks == [], f"navigation children: {tree!r}")

# An unknown action is the typed error.
error = send_action.sync(created.id, client=session, body=ActionRequest(action="noSuchAction"))
check(isinstance(error, Error) and error.error.code == "unknown_action", f"unknown action: {error!r}")

# An app session: the push is a typed event, and the tree holds the element it pushed.
app = create_session.sync(client=Client(base_url=base), body=CreateAppSession(feature="app", state=AppState(path=[])))
check(isinstance(app, CreatedSession), f"create app: {app!r}")
session = AuthenticatedClient(base_url=base, token=app.token)
result = send_action.sync(app.id, client=session, body=ActionRequest(target="root", action="counterButtonTapped"))
pushes = [event for event in result.events if isinstance(event, PushEnvelope)]
check(len(pushes) == 1 and pushes[0].data.feature == FeatureName.COUNTER, f"push events: {result.events!r}")
tree = get_navigation.sync(app.id, client=session)
elements = tree.stacks[0].elements if tree.stacks else []
check(len(elements) == 1 and elements[0].id == pushes[0].data.id and elements[0].feature == FeatureName.COUNTER
      and elements[0].state["count"] == 0, f"app tree: {tree!r}")
read = get_session.sync(app.id, client=session)
check(read.version == 1 and read.feature == FeatureName.APP, f"session: {read!r}")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("  ok: created, acted and read the tree through the generated client's typed models")
PY
echo "OK: a client generated from openapi.yaml drives navd"
