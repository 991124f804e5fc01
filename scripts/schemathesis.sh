#!/usr/bin/env bash
# Checks a navd binary against openapi.yaml:
#   1. openapi-spec-validator: the document is valid OpenAPI 3.1;
#   2. an event-stream and auth check (Python, below): the typed contract (`feature` selects
#      the state schema; the schema and navd agree on valid and invalid sessions), real SSE frames
#      of every event type, a resumed stream, and DELETE's 401/204/404, validated against the
#      document's schemas
#      (schemathesis cannot test an endless text/event-stream response);
#   3. schemathesis, with every check, in three runs on one navd:
#      a. every operation but DELETE /sessions/{id} and GET /sessions/{id}/events, on one
#         deep-linked `app` session whose id and token are fixed for the run;
#      b. DELETE /sessions/{id} on a session of its own (the first success ends it; later cases
#         get 404, which is why `ignored_auth` and `missing_required_header` are left out of
#         this run only: both re-send the URL without credentials and expect 401, but a deleted
#         session is rightly 404 — step 2 checks DELETE's 401s instead);
#      c. GET /sessions/{id}/events without credentials (every answer is 401 or 405; with
#         valid ones the stream never ends).
#
#   scripts/schemathesis.sh [NAVD_BINARY]     (default .build/debug/navd)
#
# navd runs on a free loopback port with a fact service URL nothing listens on, so no request
# leaves the machine. The tools are pinned and installed with pip into a virtualenv
# ($NAVD_OPENAPI_TOOLS, default .build/openapi-tools) unless it already has those versions.
# Environment: NAVD_SCHEMATHESIS_MAX_EXAMPLES (default 100), NAVD_SCHEMATHESIS_SEED (default
# fixed, so a failure reproduces; `random` for a fresh one), NAVD_SCHEMATHESIS_KEEP=1 (keep the
# work directory with navd's log and the HAR reports). Takes about a minute on 2 cores.
set -Eeuo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/navd-lib.sh"

SCHEMATHESIS_VERSION=4.32.5
VALIDATOR_VERSION=0.9.0

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
navd=${1:-.build/debug/navd}
[[ $navd == /* ]] || navd=$PWD/$navd
[[ -x $navd ]] || { echo "FAIL: no navd binary at $navd (swift build --product navd)" >&2; exit 1; }
cd "$repo_root"

max_examples=${NAVD_SCHEMATHESIS_MAX_EXAMPLES:-100}
seed=${NAVD_SCHEMATHESIS_SEED:-20250101}
tools=${NAVD_OPENAPI_TOOLS:-$repo_root/.build/openapi-tools}
work=$(mktemp -d "${TMPDIR:-/tmp}/navd-schemathesis.XXXXXX")
navd_pid=

cleanup() {
    local status=$?
    stop_navd "$status" "$work/navd.log"
    if [[ ${NAVD_SCHEMATHESIS_KEEP:-0} == 1 ]]; then
        echo "work directory kept: $work" >&2
    else
        rm -rf "$work"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- Tools ------------------------------------------------------------------------------------
have_tools() {
    [[ -x $tools/bin/schemathesis && -x $tools/bin/openapi-spec-validator ]] || return 1
    [[ $("$tools/bin/schemathesis" --version 2>/dev/null) == *" $SCHEMATHESIS_VERSION" ]] || return 1
    [[ $("$tools/bin/openapi-spec-validator" --version 2>/dev/null) == *" $VALIDATOR_VERSION" ]] || return 1
}
if ! have_tools; then
    echo "installing schemathesis $SCHEMATHESIS_VERSION and openapi-spec-validator $VALIDATOR_VERSION into $tools"
    python3 -m venv "$tools" || { echo "FAIL: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
    "$tools/bin/python" -m pip install --quiet --disable-pip-version-check \
        "schemathesis==$SCHEMATHESIS_VERSION" "openapi-spec-validator==$VALIDATOR_VERSION"
    have_tools || { echo "FAIL: the tools did not install" >&2; exit 1; }
fi
python=$tools/bin/python

# --- The document -----------------------------------------------------------------------------
echo "== openapi-spec-validator openapi.yaml"
"$tools/bin/openapi-spec-validator" openapi.yaml

# --- navd -------------------------------------------------------------------------------------
start_navd "$navd" "$work/navd.log" --connect-delay-ms 0 --alert-dismiss-ms 50
base=http://127.0.0.1:$port
echo "== navd $navd listening on $base (pid $navd_pid)"

# --- Event stream and DELETE, validated against the document's schemas ------------------------
echo "== event streams and DELETE against the document's schemas"
"$python" - "$base" openapi.yaml <<'PY'
import http.client, json, sys, threading, time, urllib.parse
import jsonschema, yaml

base, spec_path = sys.argv[1], sys.argv[2]
host, port = urllib.parse.urlsplit(base).hostname, urllib.parse.urlsplit(base).port
doc = yaml.safe_load(open(spec_path))
failures = []

def validator(name):
    # The whole document is the root, so the `#/components/...` references resolve.
    return jsonschema.Draft202012Validator({**doc, "$ref": f"#/components/schemas/{name}"})

sse_event, mutation_result, error = validator("ServerSentEvent"), validator("MutationResult"), validator("Error")

def check(condition, message):
    if not condition:
        failures.append(message)
        print("  FAIL:", message)

def conforms(v, value, what):
    errors = sorted(v.iter_errors(value), key=lambda e: list(e.absolute_path))
    check(not errors, f"{what} does not match the schema: {errors[0].message if errors else ''} in {json.dumps(value)[:400]}")

def request(method, path, body=None, token=None, headers=None):
    connection = http.client.HTTPConnection(host, port, timeout=20)
    h = dict(headers or {})
    if token: h["Authorization"] = f"Bearer {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    connection.request(method, path, body=data, headers=h)
    response = connection.getresponse()
    raw = response.read()
    connection.close()
    return response.status, dict(response.getheaders()), (json.loads(raw) if raw else None)

def mutate(method, path, body, token, **kwargs):
    status, headers, result = request(method, path, body, token, **kwargs)
    check(status == 200, f"{method} {path} {json.dumps(body)}: {status} {result}")
    if status == 200:
        conforms(mutation_result, result, f"{method} {path} answer")
        check(headers.get("ETag") == f'"{result["version"]}"', f"{method} {path}: ETag {headers.get('ETag')}")
    return result

class Stream:
    """Reads an event stream on a thread until it closes, keeping each frame as an envelope."""
    def __init__(self, path, headers):
        self.frames, self.comments, self.first_line, self.closed = [], 0, None, threading.Event()
        self.connection = http.client.HTTPConnection(host, port, timeout=30)
        self.connection.request("GET", path, headers=headers)
        self.response = self.connection.getresponse()
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self):
        fields = {}
        try:
            while True:
                line = self.response.fp.readline()
                if not line:
                    break
                line = line.decode("utf-8").rstrip("\n")
                if self.first_line is None: self.first_line = line
                if line == "":
                    if "event" in fields:
                        self.frames.append({"id": int(fields["id"]), "event": fields["event"], "data": json.loads(fields["data"])})
                    fields = {}
                elif line.startswith(":"):
                    self.comments += 1
                else:
                    name, _, value = line.partition(":")
                    fields[name] = value[1:] if value.startswith(" ") else value
        except Exception as e:  # a timeout is reported by wait() below
            failures.append(f"reading the stream: {e!r}")
        finally:
            self.closed.set()

    def wait_for(self, count, seconds=5):
        deadline = time.time() + seconds
        while len(self.frames) < count and time.time() < deadline and not self.closed.is_set():
            time.sleep(0.01)

    def finish(self, what, seconds=5):
        check(self.closed.wait(seconds), f"{what}: the stream did not close after `end`")
        self.connection.close()
        check(self.response.status == 200, f"{what}: status {self.response.status}")
        check(self.response.getheader("Content-Type", "").startswith("text/event-stream"), f"{what}: Content-Type {self.response.getheader('Content-Type')}")
        check(self.response.getheader("Cache-Control") == "no-cache", f"{what}: Cache-Control {self.response.getheader('Cache-Control')}")
        check(self.first_line == "retry: 3000", f"{what}: first line {self.first_line!r}")
        for frame in self.frames:
            conforms(sse_event, frame, f"{what}: event {frame['id']} ({frame['event']})")
        ids = [f["id"] for f in self.frames]
        check(all(a < b for a, b in zip(ids, ids[1:])), f"{what}: ids not strictly increasing: {ids}")
        check(bool(self.frames) and self.frames[-1]["event"] == "end", f"{what}: does not end with `end`")
        return self.frames

def create(feature, state=None):
    body = {"feature": feature} if state is None else {"feature": feature, "state": state}
    status, headers, result = request("POST", "/sessions", body)
    check(status == 201, f"POST /sessions {body}: {status} {result}")
    check(headers.get("Location") == f"/sessions/{result['id']}", f"Location {headers.get('Location')}")
    return result["id"], result["token"]

# The typed contract: `feature` selects the state's schema, so a state of another feature is
# invalid by the schema alone; and navd agrees with the schema on every example.
create_request = validator("CreateSessionRequest")
for body, valid in (
    ({"feature": "app"}, True),
    ({"feature": "app", "state": {"path": [{"counter": {"count": 1}}, {"settings": {"isOn": True}}]}}, True),
    ({"feature": "counter", "state": {"count": 0, "destination": {"fact": {"value": "0 is a good number"}}}}, True),
    ({"feature": "wifi", "state": None}, True),
    ({"feature": "wifi", "state": {"foundNetworks": [{"id": "n1", "connectivity": 0.5}]}}, True),
    ({"feature": "app", "state": {"count": 0}}, False),
    ({"feature": "counter", "state": {"path": []}}, False),
    ({"feature": "counter", "state": {"count": "0"}}, False),
    ({"feature": "counter", "state": {"destination": {"sheet": {}}}}, False),
    ({"feature": "wifi", "state": {"foundNetworks": [{"connectivity": 2}]}}, False),
    ({"feature": "fact"}, False),
    ({"state": {}}, False),
):
    errors = list(create_request.iter_errors(body))
    check(not errors if valid else bool(errors), f"CreateSessionRequest {'rejects' if valid else 'accepts'} {json.dumps(body)}")
    status = request("POST", "/sessions", body)[0]
    check(status == (201 if valid else 422), f"POST /sessions {json.dumps(body)}: {status}, the schema says {'valid' if valid else 'invalid'}")

# An app session: push, present, state, dismiss (server and client), pop, end; then a resumed stream.
sid, token = create("app")
s = f"/sessions/{sid}"
live = Stream(f"{s}/events?token={token}", {})
live.wait_for(1)
mutate("POST", f"{s}/actions", {"action": "counterButtonTapped"}, token)                      # push e…
mutate("PUT", f"{s}/state", {"state": {"path": [{"counter": {"destination": {"fact": {"value": "42 is the answer"}}}}]}}, token)  # present
tree = request("GET", f"{s}/navigation", token=token)[2]
counter = tree["stacks"][0]["elements"][0]["id"]
mutate("POST", f"{s}/actions", {"target": counter, "action": "incrementButtonTapped"}, token)  # dismiss (server), state
mutate("POST", f"{s}/actions", {"target": counter, "action": "settingsButtonTapped"}, token)   # present (drillDown)
presented = request("GET", f"{s}/navigation", token=token)[2]["stacks"][0]["elements"][0]["presentations"][0]["id"]
mutate("POST", f"{s}/presentations/{presented}/dismiss", None, token)                            # dismiss (client)
mutate("POST", f"{s}/features/{counter}/push", {"value": {"settings": {}}}, token)              # push from anywhere
mutate("PUT", f"{s}/features/{request('GET', f'{s}/navigation', token=token)[2]['stacks'][0]['elements'][1]['id']}/bindings/isOn", True, token)
mutate("POST", f"{s}/actions?wait=true&timeout=5", {"target": counter, "action": "factButtonTapped"}, token)  # fails: alert
mutate("POST", f"{s}/stacks/{tree['stacks'][0]['id']}/pop", {"count": 2}, token)              # pop (client)
live.wait_for(12)
resume_after = live.frames[3]["id"] if len(live.frames) > 3 else 0
resumed = Stream(f"{s}/events", {"Authorization": f"Bearer {token}", "Last-Event-ID": str(resume_after)})
resumed_query = Stream(f"{s}/events?token={token}&lastEventId={resume_after}", {})
fresh = Stream(f"{s}/events", {"Authorization": f"Bearer {token}", "Last-Event-ID": "not-an-id"})
for stream in (resumed, resumed_query, fresh): stream.wait_for(1)
time.sleep(0.2)

# DELETE: no token and a wrong token are 401 and change nothing; the token is 204; again, 404.
for headers, what in (({}, "no token"), ({"Authorization": "Bearer " + "0" * 64}, "a wrong token"), ({"Authorization": f"Basic {token}"}, "a Basic credential")):
    status, response_headers, body = request("DELETE", s, headers=headers)
    check(status == 401 and response_headers.get("WWW-Authenticate") == "Bearer", f"DELETE with {what}: {status} {response_headers}")
    if body is not None: conforms(error, body, f"DELETE with {what}")
status, _, body = request("DELETE", s, token=token)
check(status == 204 and body is None, f"DELETE: {status} {body}")
status, _, body = request("DELETE", s, token=token)
check(status == 404 and body["error"]["code"] == "session_not_found", f"DELETE again: {status} {body}")

frames = live.finish("app stream")
kinds = {f["event"] for f in frames}
check(kinds == {"snapshot", "present", "dismiss", "push", "pop", "state", "end"}, f"app stream: event types {sorted(kinds)}")
check(frames[0]["event"] == "snapshot", "app stream: does not start with a snapshot")
origins = {f["data"]["origin"] for f in frames if f["event"] in ("dismiss", "pop")}
check(origins == {"server", "client"}, f"app stream: origins {origins}")
for name, stream in (("Last-Event-ID", resumed), ("?lastEventId", resumed_query)):
    got = stream.finish(f"stream resumed with {name}")
    check(got == [f for f in frames if f["id"] > resume_after], f"stream resumed with {name} after {resume_after}: {[f['id'] for f in got]}")
got = fresh.finish("stream with an unknown Last-Event-ID")
check(got[0]["event"] == "snapshot", "an unknown Last-Event-ID does not start with a snapshot")

# A gallery session: every style, alerts with buttons, popover anchors, a binding, a timed alert.
sid, token = create("gallery")
s = f"/sessions/{sid}"
live = Stream(f"{s}/events", {"Authorization": f"Bearer {token}"})
live.wait_for(1)
for action in ("isPresentedButtonTapped", "itemButtonTapped", "destinationButtonTapped"):
    for style in ("alert", "confirmationDialog", "sheet", "popover", "fullScreenCover", "drillDown"):
        mutate("POST", f"{s}/actions", {"action": action, "args": {"style": style}}, token)
for action in ("sheetAndPopoverButtonTapped", "nestedButtonTapped", "editTextButtonTapped"):
    mutate("POST", f"{s}/actions", {"action": action}, token)
mutate("POST", f"{s}/actions?wait=1", {"action": "timedAlertButtonTapped"}, token)
tree = request("GET", f"{s}/navigation", token=token)[2]
for node in tree["presentations"]:
    if node["style"] == "alert":
        mutate("POST", f"{s}/presentations/{node['id']}/dismiss", {"button": node["alert"]["buttons"][0]["id"]}, token)
    elif node["feature"] == "textEditor":
        mutate("PUT", f"{s}/features/{node['id']}/bindings/text", "edited", token)
    elif node["feature"] == "nested":
        status, _, body = request("POST", f"{s}/actions", {"target": node["id"], "action": "nestedButtonTapped"}, token)
check(request("DELETE", s, token=token)[0] == 204, "DELETE gallery session")
frames = live.finish("gallery stream")
styles = {f["data"]["style"] for f in frames if f["event"] == "present"}
check(styles == {"alert", "confirmationDialog", "sheet", "popover", "fullScreenCover", "drillDown"}, f"gallery stream: styles {sorted(styles)}")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("  ok: every frame and answer matches openapi.yaml")
PY

# --- schemathesis -----------------------------------------------------------------------------
# Expected statuses beyond schemathesis' defaults, because the API is stateful: schema-valid
# data may name a feature that is not on screen (409), carry an If-Match of another version
# (412), or send an action, binding or state the feature does not have (422); an If-None-Match
# naming a file's current tag (or `*`) is rightly 304. A precondition is
# checked before the body's meaning, so invalid data may also get 412.
cat >"$work/schemathesis.toml" <<'TOML'
[parameters]
"path.id" = "${NAVD_SESSION_ID}"

[checks.positive_data_acceptance]
expected-statuses = ["2xx", "304", "401", "404", "409", "412", "422"]

[checks.negative_data_rejection]
expected-statuses = ["400", "401", "404", "405", "409", "412", "413", "414", "415", "422", "431"]
TOML

new_session() { # FEATURE [STATE_JSON] -> "id token"
    "$python" - "$base" "$@" <<'PY'
import json, sys, urllib.request
base, feature = sys.argv[1], sys.argv[2]
body = {"feature": feature, **({"state": json.loads(sys.argv[3])} if len(sys.argv) > 3 else {})}
request = urllib.request.Request(f"{base}/sessions", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
with urllib.request.urlopen(request, timeout=10) as response:
    session = json.load(response)
print(session["id"], session["token"])
PY
}

seed_options=()
[[ $seed == random ]] || seed_options=(--seed "$seed")
schemathesis() { # NAME SESSION_ID [TOKEN|-] OPTIONS...
    local name=$1 session=$2 token=$3
    shift 3
    local auth=()
    [[ $token == - ]] || auth=(-H "Authorization: Bearer $token")
    echo "== schemathesis ($name)"
    # From the work directory: schemathesis keeps a cache in ./.schemathesis.
    (cd "$work" && NAVD_SESSION_ID=$session "$tools/bin/schemathesis" --config-file "$work/schemathesis.toml" run "$repo_root/openapi.yaml" \
        --url "$base" "${auth[@]}" --checks all --max-examples "$max_examples" "${seed_options[@]}" \
        --workers 1 --request-timeout 65 --generation-database none --no-color \
        --report har --report-har-path "$work/$name.har" "$@")
}

# The main session, three screens deep with a sheet on top: e2 (counter) presents p3 (fact),
# e4 (settings), e5 (counter) in stack s1 — the ids openapi.yaml's examples use.
main=$(new_session app '{"path":[{"counter":{"destination":{"fact":{"value":"0 is a good number"}}}},{"settings":{}},{"counter":{}}]}')
doomed=$(new_session counter)
read -r main_id main_token <<<"$main"
read -r doomed_id doomed_token <<<"$doomed"

schemathesis every-operation "$main_id" "$main_token" \
    --exclude-operation-id endSession --exclude-operation-id streamEvents
schemathesis delete "$doomed_id" "$doomed_token" \
    --include-operation-id endSession --exclude-checks ignored_auth,missing_required_header
schemathesis events-without-credentials "$main_id" - \
    --include-operation-id streamEvents

echo "OK: openapi.yaml is valid and navd conforms to it"
