#!/usr/bin/env python3
"""Drives the inspector (GET /) in a real headless Chromium against a real navd.

    scripts/browser-test.py [NAVD_BINARY]      (default .build/debug/navd)

Python standard library only: Chromium is driven over the DevTools protocol on a pipe
(--remote-debugging-pipe: JSON messages separated by NUL bytes on fds 3 and 4), so there is no
WebSocket, no driver and nothing from PyPI. navd runs on a free loopback port with its fact
service pointed at a loopback stub in this process; nothing leaves the machine.

Scenarios: the counter's fact sheet and its dismissals (close button, Escape); the full Wi-Fi
flow with its alerts and a drill-down's Back; the app stack (a deep link, push, the back menu
popping several, Back); two gallery styles at once (a sheet and a popover at its anchor, a tap
outside it, an alert over the sheet) with a second tab on the same session staying in step; and
a dropped connection (navd stopped and restarted on the same --data-dir) that the page shows as
"reconnecting" and resumes from, holding the same tree. After every step the tree drawn in the
DOM (read back from its data attributes, visible elements only) must equal
GET /sessions/{id}/navigation. Screenshots go to a directory printed at the end.
"""
import http.client, http.server, json, os, shutil, signal, subprocess, sys, tempfile, threading, time, urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAVD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".build/debug/navd"))
CHROMIUM = os.environ.get("NAVD_CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")
ARTIFACTS = os.path.join(ROOT, ".build", "browser-test")
WORK = tempfile.mkdtemp(prefix="navd-browser-")
started = time.time()


def fail(message):
    raise SystemExit(f"FAIL: {message}")


# --- A fact service on loopback --------------------------------------------------------------
class Facts(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = f"{self.path.strip('/')} is the number of this test's facts".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


facts = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Facts)
threading.Thread(target=facts.serve_forever, daemon=True).start()


# --- navd -------------------------------------------------------------------------------------
class Navd:
    def __init__(self, port=0):
        self.log = open(os.path.join(WORK, "navd.log"), "ab")
        self.process = subprocess.Popen([
            NAVD, "--host", "127.0.0.1", "--port", str(port), "--data-dir", os.path.join(WORK, "data"),
            "--fact-base-url", f"http://127.0.0.1:{facts.server_address[1]}", "--connect-delay-ms", "300",
            "--log-requests", "off"], stdout=subprocess.PIPE, stderr=self.log)
        while True:  # lines before `listening` (a restart's `recovered`) are kept in the log
            line = self.process.stdout.readline()
            if not line:
                fail(f"navd did not start: see {WORK}/navd.log")
            self.log.write(line)
            if json.loads(line).get("event") == "listening":
                self.port = json.loads(line)["port"]
                break
        threading.Thread(target=lambda: [self.log.write(l) for l in self.process.stdout], daemon=True).start()

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        if self.process.wait(10) != 0:
            fail(f"navd exited with {self.process.returncode}")


def api(method, path, body=None, token=None):
    connection = http.client.HTTPConnection("127.0.0.1", navd.port, timeout=10)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = None
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    connection.request(method, path, body=data, headers=headers)
    response = connection.getresponse()
    raw = response.read()
    connection.close()
    if response.status >= 300:
        fail(f"{method} {path}: {response.status} {raw!r}")
    return json.loads(raw) if raw else None


# --- Chromium over the DevTools protocol ---------------------------------------------------------
class Browser:
    def __init__(self):
        to_chrome, from_chrome = os.pipe(), os.pipe()
        # Above 4, so dup2 cannot clobber them; descriptors Python makes close on exec, so only 3
        # and 4 (dup2 makes them inheritable) reach Chromium.
        keep = (os.dup(to_chrome[0]), os.dup(from_chrome[1]))

        def pipes():
            os.dup2(keep[0], 3)
            os.dup2(keep[1], 4)

        self.process = subprocess.Popen([
            CHROMIUM, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
            "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--window-size=1400,1000", f"--user-data-dir={WORK}/chromium", "about:blank",
        ], preexec_fn=pipes, close_fds=False, stdout=subprocess.DEVNULL, stderr=open(os.path.join(WORK, "chromium.log"), "wb"))
        for fd in (to_chrome[0], from_chrome[1], *keep):
            os.close(fd)
        self.writer, self.reader = os.fdopen(to_chrome[1], "wb"), os.fdopen(from_chrome[0], "rb")
        self.next_id, self.answers, self.lock = 0, {}, threading.Condition()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        buffer = b""
        while chunk := self.reader.read1(65536):
            buffer += chunk
            while b"\0" in buffer:
                message, buffer = buffer.split(b"\0", 1)
                message = json.loads(message)
                if "id" in message:
                    with self.lock:
                        self.answers[message["id"]] = message
                        self.lock.notify_all()

    def send(self, method, session=None, **params):
        with self.lock:
            self.next_id += 1
            number = self.next_id
        message = {"id": number, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self.writer.write(json.dumps(message).encode() + b"\0")
        self.writer.flush()
        with self.lock:
            if not self.lock.wait_for(lambda: number in self.answers, 30):
                fail(f"Chromium did not answer {method}")
            answer = self.answers.pop(number)
        if "error" in answer:
            fail(f"{method}: {answer['error']}")
        return answer["result"]

    def tab(self, url):
        target = self.send("Target.createTarget", url=url)["targetId"]
        return Tab(self, self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"])

    def close(self):
        try:
            self.send("Browser.close")
        except SystemExit:
            pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


READ_TREE = """(() => {
  const visible = (el) => el.getClientRects().length > 0;
  const all = (selector) => [...document.querySelectorAll(selector)].filter(visible);
  const byIndex = (a, b) => Number(a.dataset.index) - Number(b.dataset.index);
  const read = (el) => {
    const d = el.dataset, node = { id: d.nodeId };
    for (const key of ["slot", "style", "anchor", "feature"]) if (d[key] !== undefined) node[key] = d[key];
    if (d.alert) node.alert = JSON.parse(d.alert);
    node.state = JSON.parse(d.state);
    node.presentations = all(`.screen[data-owner="${CSS.escape(d.nodeId)}"]`).sort(byIndex).map(read);
    node.stacks = all(`.stack[data-owner="${CSS.escape(d.nodeId)}"]`).map((s) => ({
      id: s.dataset.stackId, slot: s.dataset.slot,
      elements: all(`.screen[data-in-stack="${CSS.escape(s.dataset.stackId)}"]`).sort(byIndex).map(read) }));
    return node;
  };
  const root = all(".screen:not([data-owner]):not([data-in-stack])");
  return root.length === 1 ? read(root[0]) : null;
})()"""


class Tab:
    def __init__(self, browser, session):
        self.browser, self.session = browser, session
        self.send("Page.enable")
        self.send("Runtime.enable")

    def send(self, method, **params):
        return self.browser.send(method, self.session, **params)

    def js(self, expression):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            fail(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait(self, expression, what, seconds=10):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if self.js(expression):
                return
            time.sleep(0.05)
        print(f"timed out waiting for {what}", file=sys.stderr)
        self.screenshot(f"failed-{what.replace(' ', '-')}")
        fail(f"timed out waiting for {what}")

    def click(self, selector):
        self.wait(f"!!document.querySelector({json.dumps(selector)})", f"{selector} to appear")
        self.js(f"document.querySelector({json.dumps(selector)}).click()")

    def mouse(self, x, y):
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def key(self, key, code, number):
        for kind in ("keyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", type=kind, key=key, code=code, windowsVirtualKeyCode=number)

    def type_into(self, selector, text):
        """Focuses a field, clears it and types like a keyboard would (one input event per insert)."""
        self.click(selector)
        self.js(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.focus(); e.select(); }})()")
        self.send("Input.insertText", text=text)

    def screenshot(self, name):
        self.send("Page.bringToFront")
        data = self.send("Page.captureScreenshot", format="png")["data"]
        import base64
        with open(os.path.join(ARTIFACTS, f"{name}.png"), "wb") as file:
            file.write(base64.b64decode(data))

    def session_credentials(self):
        self.wait("location.hash.includes('token=')", "a session in the fragment")
        fragment = urllib.parse.parse_qs(self.js("location.hash").lstrip("#"))
        return fragment["session"][0], fragment["token"][0]

    def in_step(self, sid, token, what, seconds=10):
        """Waits until the tree drawn in the DOM equals GET /navigation (a step's events have arrived)."""
        deadline = time.time() + seconds
        # The page's requests are answered first, so GET /navigation already holds their change.
        self.wait("Number(document.documentElement.dataset.pending ?? 0) === 0", f"{what}: the page's requests", seconds)
        while True:
            expected = api("GET", f"/sessions/{sid}/navigation", token=token)
            drawn = self.js(READ_TREE)
            if drawn == expected:
                return expected
            if time.time() > deadline:
                self.screenshot(f"failed-{what.replace(' ', '-')}")
                fail(f"{what}: the drawn tree differs from GET /navigation\n drawn:    {json.dumps(drawn)}\n expected: {json.dumps(expected)}")
            time.sleep(0.05)


def presented(tree, predicate):
    nodes, found = [tree], []
    while nodes:
        node = nodes.pop(0)
        if predicate(node):
            found.append(node)
        nodes += node["presentations"] + [e for s in node["stacks"] for e in s["elements"]]
    return found


def start_session(tab, feature, deep_link=""):
    tab.wait("document.querySelectorAll('#feature option').length > 0", "the feature list")
    tab.js(f"document.querySelector('#feature').value = {json.dumps(feature)}")
    tab.js(f"document.querySelector('#deep-link').value = {json.dumps(deep_link)}")
    tab.js("location.hash = ''")
    tab.click("#start button[type=submit]")
    sid, token = tab.session_credentials()
    tab.wait("document.querySelector('#connection').dataset.connection === 'open'", "the stream to open")
    return sid, token


# --- The scenarios ------------------------------------------------------------------------------
def counter(tab):
    sid, token = start_session(tab, "counter")
    tab.in_step(sid, token, "a new counter")
    tab.click('[data-key="action-root-incrementButtonTapped"]')
    tree = tab.in_step(sid, token, "increment")
    assert tree["state"]["count"] == 1, tree
    tab.click('[data-key="action-root-factButtonTapped"]')
    tab.wait("!!document.querySelector('.panel-sheet .screen[data-feature=fact]')", "the fact sheet")
    tree = tab.in_step(sid, token, "the fact sheet")
    sheet = presented(tree, lambda n: n.get("style") == "sheet")[0]
    assert "1 is the number" in sheet["state"]["value"], sheet
    assert tab.js("document.querySelector('.panel-sheet').getAttribute('role')") == "dialog"
    tab.screenshot("counter-fact-sheet")
    tab.click(f'[data-key="close-{sheet["id"]}"]')
    tree = tab.in_step(sid, token, "the sheet closed by its close button")
    assert tree["presentations"] == [], tree
    tab.click('[data-key="action-root-factButtonTapped"]')
    tab.wait("!!document.querySelector('.panel-sheet')", "the fact sheet again")
    tab.key("Escape", "Escape", 27)
    tree = tab.in_step(sid, token, "the sheet closed by Escape")
    assert tree["presentations"] == [], tree
    tab.screenshot("counter-dismissed")


def wifi(tab):
    sid, token = start_session(tab, "wifi")
    tab.in_step(sid, token, "a new wifi")
    tab.type_into('[data-key="action-root-networkTapped-network"]', "n1")
    tab.click('[data-key="action-root-networkTapped"]')
    tab.wait("!!document.querySelector('.panel-sheet .screen[data-feature=connect]')", "the connect sheet")
    tree = tab.in_step(sid, token, "the connect sheet")
    connect_id = presented(tree, lambda n: n["feature"] == "connect")[0]["id"]
    tab.type_into(f'[data-key="bind-{connect_id}-password"]', "wrong")
    tab.wait(f"JSON.parse(document.querySelector('[data-node-id={connect_id}]').dataset.state).password === 'wrong'", "the password binding")
    tab.click(f'[data-key="action-{connect_id}-joinButtonTapped"]')
    tab.wait("!!document.querySelector('[role=alertdialog]')", "the incorrect-password alert")
    tree = tab.in_step(sid, token, "the incorrect-password alert")
    alert = presented(tree, lambda n: n.get("style") == "alert")[0]
    tab.screenshot("wifi-incorrect-password")
    tab.click(f'[data-key="button-{alert["id"]}-{alert["alert"]["buttons"][0]["id"]}"]')
    tab.in_step(sid, token, "the alert's button")
    tab.type_into(f'[data-key="bind-{connect_id}-password"]', "blob")
    tab.wait(f"JSON.parse(document.querySelector('[data-node-id={connect_id}]').dataset.state).password === 'blob'", "the new password")
    tab.click(f'[data-key="action-{connect_id}-joinButtonTapped"]')
    tab.wait("!document.querySelector('.panel-sheet')", "the joined sheet to go")
    tree = tab.in_step(sid, token, "joined")
    assert tree["state"]["selectedNetworkID"] == "n1", tree["state"]
    tab.type_into('[data-key="action-root-networkTapped-network"]', "n1")
    tab.click('[data-key="action-root-networkTapped"]')
    tab.wait("!!document.querySelector('.screen[data-feature=detail][data-style=drillDown]')", "the detail drill-down")
    tree = tab.in_step(sid, token, "the network's details")
    detail = presented(tree, lambda n: n["feature"] == "detail")[0]["id"]
    tab.click(f'[data-key="action-{detail}-forgetNetworkButtonTapped"]')
    tab.wait("!!document.querySelector('[role=alertdialog]')", "the forget alert")
    tree = tab.in_step(sid, token, "the forget alert")
    alert = presented(tree, lambda n: n.get("style") == "alert")[0]
    forget = [b for b in alert["alert"]["buttons"] if b["role"] == "destructive"][0]
    tab.screenshot("wifi-forget-alert")
    tab.click(f'[data-key="button-{alert["id"]}-{forget["id"]}"]')
    tree = tab.in_step(sid, token, "forgotten")
    assert tree["presentations"] == [] and tree["state"]["selectedNetworkID"] is None, tree
    tab.type_into('[data-key="action-root-infoButtonTapped-network"]', "n2")
    tab.click('[data-key="action-root-infoButtonTapped"]')
    tree = tab.in_step(sid, token, "another network's details")
    detail = presented(tree, lambda n: n["feature"] == "detail")[0]["id"]
    tab.click(f'[data-key="back-{detail}"]')
    tree = tab.in_step(sid, token, "Back from the details")
    assert tree["presentations"] == [], tree


def app(tab):
    link = {"path": [{"counter": {}}, {"settings": {"isOn": True}}, {"counter": {"count": 5}}]}
    sid, token = start_session(tab, "app", json.dumps(link))
    tree = tab.in_step(sid, token, "a deep-linked app")
    elements = tree["stacks"][0]["elements"]
    assert [e["feature"] for e in elements] == ["counter", "settings", "counter"], elements
    assert tab.js("document.querySelectorAll('.screen:not(.covered)').length") == 1, "only the top screen is uncovered"
    top = elements[-1]["id"]
    tab.click(f'[data-key="push-{top}-settings"]')
    tree = tab.in_step(sid, token, "a push")
    top = tree["stacks"][0]["elements"][-1]["id"]
    tab.click(f'[data-key="bind-{top}-isOn"]')
    tree = tab.in_step(sid, token, "a toggle")
    assert tree["stacks"][0]["elements"][-1]["state"]["isOn"] is True
    tab.screenshot("app-four-deep")
    first = tree["stacks"][0]["elements"][0]["id"]
    tab.js(f"document.querySelector('.screen[data-node-id={top}] .back-menu').open = true")
    tab.click(f'[data-key="popto-{top}-{first}"]')
    tree = tab.in_step(sid, token, "back several with the back menu")
    assert [e["id"] for e in tree["stacks"][0]["elements"]] == [first], tree
    tab.click('[data-key="action-root-settingsButtonTapped"]')
    tree = tab.in_step(sid, token, "a push from the root")
    top = tree["stacks"][0]["elements"][-1]["id"]
    tab.click(f'[data-key="back-{top}"]')
    tab.in_step(sid, token, "Back")
    tab.click(f'[data-key="back-{first}"]')
    tree = tab.in_step(sid, token, "Back to the root")
    assert tree["stacks"][0]["elements"] == [], tree
    tab.screenshot("app-root")
    # A path as long as navd takes, deep-linked at once: one batch of 1,000 pushes, drawn in the
    # step's time (a draw per event, and every back menu made whole, took minutes).
    api("PUT", f"/sessions/{sid}/state", {"state": {"path": [{"counter": {"count": i}} for i in range(1000)]}}, token)
    tree = tab.in_step(sid, token, "a path of 1,000 deep-linked at once")
    assert len(tree["stacks"][0]["elements"]) == 1000
    assert tab.js("document.querySelectorAll('.back-menu button').length") == 0, "back menus are made when opened"


def gallery(tab, second):
    sid, token = start_session(tab, "gallery")
    # A link to a session this tab did not start is opened only once the user says so: whoever
    # made it sees what is typed into it.
    second.js(f"location.hash = {json.dumps(tab.js('location.hash'))}")
    second.wait("!!document.querySelector('#open-linked')", "the second tab to ask before opening the link")
    assert second.js("document.querySelector('#connection').dataset.connection") == "none", "connected before the user agreed"
    second.click("#open-linked")
    second.wait("document.querySelector('#connection').dataset.connection === 'open'", "the second tab to connect")
    tab.click('[data-key="action-root-sheetAndPopoverButtonTapped"]')
    tab.wait("!!document.querySelector('.panel-popover')", "the popover")
    tree = tab.in_step(sid, token, "a sheet and a popover at once")
    second.in_step(sid, token, "the second tab: a sheet and a popover")
    assert sorted(p["style"] for p in tree["presentations"]) == ["popover", "sheet"], tree
    anchor = tab.js("(() => { const r = document.querySelector('.anchor[data-anchor=popoverButton]').getBoundingClientRect(); return [r.left, r.bottom]; })()")
    bubble = tab.js("(() => { const r = document.querySelector('.panel-popover').getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })()")
    assert 0 <= bubble[1] - anchor[1] <= 10 and abs(bubble[0] - anchor[0]) <= 10, (anchor, bubble)
    tab.screenshot("gallery-sheet-and-popover")
    second.screenshot("gallery-second-tab")
    # A tap outside the popover, inside the phone.
    phone = tab.js("(() => { const r = document.querySelector('#phone').getBoundingClientRect(); return [r.left, r.bottom]; })()")
    tab.mouse(phone[0] + 40, phone[1] - 40)
    tree = tab.in_step(sid, token, "a tap outside the popover")
    assert [p["style"] for p in tree["presentations"]] == ["sheet"], tree
    tab.type_into('[data-key="action-root-isPresentedButtonTapped-style"]', "alert")
    tab.click('[data-key="action-root-isPresentedButtonTapped"]')
    tab.wait("!!document.querySelector('[role=alertdialog]')", "an alert over the sheet")
    tree = tab.in_step(sid, token, "an alert over a sheet")
    second.in_step(sid, token, "the second tab: an alert over a sheet")
    assert sorted(p["style"] for p in tree["presentations"]) == ["alert", "sheet"], tree
    labelled = tab.js("(() => { const d = document.querySelector('[role=alertdialog]'); return d.getAttribute('aria-modal') === 'true' && !!document.getElementById(d.getAttribute('aria-labelledby')); })()")
    assert labelled, "the alert dialog is modal and labelled"
    tab.screenshot("gallery-alert-over-sheet")
    tab.key("Escape", "Escape", 27)
    tree = tab.in_step(sid, token, "Escape on the alert")
    assert [p["style"] for p in tree["presentations"]] == ["sheet"], tree
    # The second tab acts too; the first follows.
    sheet = tree["presentations"][0]["id"]
    second.click(f'[data-key="close-{sheet}"]')
    tab.in_step(sid, token, "the first tab follows the second")
    second.in_step(sid, token, "the second tab's own dismissal")
    return sid, token


def dropped_connection(tab, sid, token):
    global navd
    tab.click('[data-key="action-root-editTextButtonTapped"]')
    before = tab.in_step(sid, token, "a text editor before the drop")
    navd.stop()
    tab.wait("document.querySelector('#connection').dataset.connection === 'reconnecting'", "the page to show reconnecting")
    assert "reconnecting" in tab.js("document.querySelector('#connection').textContent")
    assert tab.js(READ_TREE) == before, "the tree stays while reconnecting"
    tab.screenshot("reconnecting")
    navd = Navd(navd.port)
    tab.wait("document.querySelector('#connection').dataset.connection === 'open'", "the page to reconnect", seconds=30)
    assert tab.in_step(sid, token, "resumed after the restart") == before
    editor = presented(before, lambda n: n["feature"] == "textEditor")[0]["id"]
    tab.type_into(f'[data-key="bind-{editor}-text"]', "typed after a restart")
    after = tab.in_step(sid, token, "a binding after the restart")
    assert presented(after, lambda n: n["feature"] == "textEditor")[0]["state"]["text"] == "typed after a restart"
    # Typing in the middle: each echo redraws the page, and the caret must stay where it was.
    field = f'document.querySelector({json.dumps(f"[data-key=bind-{editor}-text]")})'
    tab.js(f"{field}.setSelectionRange(5, 5)")
    for letter in "XY":
        tab.send("Input.insertText", text=letter)
        tab.in_step(sid, token, f"typed {letter} in the middle")
    middle = api("GET", f"/sessions/{sid}/navigation", token=token)
    text = presented(middle, lambda n: n["feature"] == "textEditor")[0]["state"]["text"]
    assert text == "typedXY after a restart", f"the caret moved on a redraw: {text!r}"
    # An action's argument typed but not sent is the user's draft: a redraw keeps it.
    draft = '[data-key="action-root-itemButtonTapped-style"]'
    tab.type_into(draft, "sheet")
    tab.js(f"{field}.focus(); {field}.setSelectionRange(0, 0)")
    tab.send("Input.insertText", text="Z")
    tab.in_step(sid, token, "typed while a draft waits")
    kept = tab.js(f"document.querySelector({json.dumps(draft)}).value")
    assert kept == "sheet", f"a redraw erased an argument being typed: {kept!r}"
    ids = tab.js("[...document.querySelectorAll('#log li[data-type]')].map((li) => Number(li.querySelector('b').textContent.split(' ')[0]))")
    assert ids == sorted(set(ids), reverse=True), f"an event was shown twice or out of order: {ids}"
    tab.screenshot("resumed")


shutil.rmtree(ARTIFACTS, ignore_errors=True)  # only this run's screenshots
os.makedirs(ARTIFACTS)
navd = Navd()
browser = Browser()
try:
    base = f"http://127.0.0.1:{navd.port}"
    tab = browser.tab(f"{base}/")
    second = browser.tab(f"{base}/")
    for name, run in (("counter", lambda: counter(tab)), ("wifi", lambda: wifi(tab)), ("app", lambda: app(tab))):
        run()
        print(f"  ok: {name} ({time.time() - started:.1f} s)")
    sid, token = gallery(tab, second)
    print(f"  ok: gallery, two tabs ({time.time() - started:.1f} s)")
    dropped_connection(tab, sid, token)
    print(f"  ok: dropped connection ({time.time() - started:.1f} s)")
    errors = tab.js("document.querySelector('#error').textContent")
    if errors:
        fail(f"the page reported an error: {errors}")
finally:
    browser.close()
    if navd.process.poll() is None:
        navd.stop()
    facts.shutdown()
print(f"OK: browser tests passed in {time.time() - started:.1f} s; screenshots in {ARTIFACTS}")
shutil.rmtree(WORK, ignore_errors=True)
