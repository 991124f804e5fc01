#!/usr/bin/env python3
"""Records the event sequences the JavaScript client's tests replay (Tests/JavaScript/fixtures).

   Tests/JavaScript/record-fixtures.py http://127.0.0.1:PORT

Against a running navd (loopback only; its fact service may be down: a failed fetch is a flow
too), it drives one session per scenario while following its event stream with the token, and
writes every event with, after each step, the tree GET /sessions/{id}/navigation returned and
the id of the last event that step caused. The last step deletes the session, so each sequence
ends with `end`. Rerun it when the event format changes; the tests never need a server.
"""
import http.client, json, os, sys, threading, time, urllib.parse

base = urllib.parse.urlsplit(sys.argv[1])
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def call(method, path, body=None, token=None):
    connection = http.client.HTTPConnection(base.hostname, base.port, timeout=20)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = None
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    connection.request(method, path, body=data, headers=headers)
    response = connection.getresponse()
    raw = response.read()
    connection.close()
    if response.status >= 300 and response.status != 204:
        raise SystemExit(f"{method} {path} {body}: {response.status} {raw!r}")
    return json.loads(raw) if raw else None


class Stream(threading.Thread):
    def __init__(self, sid, token):
        super().__init__(daemon=True)
        self.events, self.connection = [], http.client.HTTPConnection(base.hostname, base.port, timeout=30)
        self.connection.request("GET", f"/sessions/{sid}/events", headers={"Authorization": f"Bearer {token}"})
        self.response = self.connection.getresponse()
        self.start()

    def run(self):
        fields = {}
        for line in self.response.fp:
            line = line.decode().rstrip("\n")
            if line == "":
                if "event" in fields:
                    self.events.append({"id": int(fields["id"]), "event": fields["event"], "data": json.loads(fields["data"])})
                fields = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value

    def settle(self, last_id):
        deadline = time.time() + 10
        while (not self.events or self.events[-1]["id"] < last_id) and time.time() < deadline:
            time.sleep(0.01)


def record(name, feature, steps, state=None):
    created = call("POST", "/sessions", {"feature": feature, **({"state": state} if state else {})})
    sid, token = created["id"], created["token"]
    s = f"/sessions/{sid}"
    stream = Stream(sid, token)
    checkpoints = []
    for step in steps:
        tree = call("GET", f"{s}/navigation", token=token)
        method, path, body = step(tree)
        answer = call(method, s + path, body, token)
        last = answer["events"][-1]["id"] if answer and answer["events"] else None
        if last is not None:
            stream.settle(last)
        if method != "DELETE":
            checkpoints.append({"step": f"{method} {path} {json.dumps(body)}", "through": stream.events[-1]["id"],
                                "navigation": call("GET", f"{s}/navigation", token=token)})
    stream.join(10)
    with open(os.path.join(out, f"{name}.json"), "w") as file:
        json.dump({"feature": feature, "events": stream.events, "checkpoints": checkpoints}, file, indent=1)
        file.write("\n")
    print(f"{name}: {len(stream.events)} events, {len(checkpoints)} checkpoints")


def first(tree, predicate):
    nodes = [tree]
    while nodes:
        node = nodes.pop(0)
        if predicate(node):
            return node
        nodes += node["presentations"] + [e for stack in node["stacks"] for e in stack["elements"]]
    raise SystemExit("not on screen")


act = lambda action, target="root", args=None, wait=False: lambda tree: ("POST", "/actions" + ("?wait=true" if wait else ""), {"target": target, "action": action, **({"args": args} if args else {})})
delete = lambda tree: ("DELETE", "", None)
by_feature = lambda feature: lambda node: node["feature"] == feature
by_style = lambda style: lambda node: node.get("style") == style

record("counter", "counter", [
    act("incrementButtonTapped"),
    lambda tree: ("PUT", "/state", {"state": {"count": 7, "destination": {"fact": {"value": "7 is the number of seas"}}}}),
    lambda tree: ("POST", f"/presentations/{first(tree, by_feature('fact'))['id']}/dismiss", None),
    act("factButtonTapped", wait=True),
    lambda tree: ("POST", f"/presentations/{first(tree, by_style('alert'))['id']}/dismiss", {"button": first(tree, by_style('alert'))["alert"]["buttons"][0]["id"]}),
    act("settingsButtonTapped"),
    lambda tree: ("PUT", f"/features/{first(tree, by_feature('settings'))['id']}/bindings/isOn", True),
    delete,
])
record("app", "app", [
    act("counterButtonTapped"),
    act("settingsButtonTapped"),
    lambda tree: ("POST", f"/features/{tree['stacks'][0]['elements'][0]['id']}/push", {"value": {"counter": {"count": 3}}}),
    lambda tree: ("POST", "/actions", {"target": tree["stacks"][0]["elements"][2]["id"], "action": "settingsButtonTapped"}),
    lambda tree: ("POST", f"/stacks/{tree['stacks'][0]['id']}/pop", {"count": 2}),
    lambda tree: ("PUT", "/state", {"state": {"path": [{"counter": {"destination": {"fact": {"value": "deep"}}}}, {"settings": {"isOn": True}}, {"counter": {}}]}}),
    lambda tree: ("POST", f"/stacks/{tree['stacks'][0]['id']}/pop", {"to": tree["stacks"][0]["elements"][0]["id"]}),
    delete,
])
record("wifi", "wifi", [
    act("networkTapped", args={"network": "n1"}),
    lambda tree: ("PUT", f"/features/{first(tree, by_feature('connect'))['id']}/bindings/password", "wrong"),
    lambda tree: ("POST", "/actions?wait=true", {"target": first(tree, by_feature('connect'))["id"], "action": "joinButtonTapped"}),
    lambda tree: ("POST", f"/presentations/{first(tree, by_style('alert'))['id']}/dismiss", {"button": first(tree, by_style('alert'))["alert"]["buttons"][0]["id"]}),
    lambda tree: ("PUT", f"/features/{first(tree, by_feature('connect'))['id']}/bindings/password", "blob"),
    lambda tree: ("POST", "/actions?wait=true", {"target": first(tree, by_feature('connect'))["id"], "action": "joinButtonTapped"}),
    act("networkTapped", args={"network": "n1"}),
    lambda tree: ("POST", "/actions", {"target": first(tree, by_feature('detail'))["id"], "action": "forgetNetworkButtonTapped"}),
    lambda tree: ("POST", f"/presentations/{first(tree, by_style('alert'))['id']}/dismiss", {"button": [b for b in first(tree, by_style('alert'))["alert"]["buttons"] if b["role"] == "destructive"][0]["id"]}),
    act("refreshNetworks"),
    delete,
])
record("gallery", "gallery", [
    act("sheetAndPopoverButtonTapped"),
    act("nestedButtonTapped"),
    lambda tree: ("POST", "/actions", {"target": first(tree, by_feature('nested'))["id"], "action": "presentChildButtonTapped"}),
    lambda tree: ("POST", f"/presentations/{first(tree, by_feature('nested'))['id']}/dismiss", None),
    act("destinationButtonTapped", args={"style": "popover"}),
    act("destinationButtonTapped", args={"style": "confirmationDialog"}),
    lambda tree: ("POST", f"/presentations/{first(tree, by_style('confirmationDialog'))['id']}/dismiss", {"button": "cancel"}),
    act("editTextButtonTapped"),
    lambda tree: ("PUT", f"/features/{first(tree, by_feature('textEditor'))['id']}/bindings/text", "typed"),
    lambda tree: ("PUT", "/features/root/bindings/fullScreenCoverIsPresented", True),
    delete,
])
