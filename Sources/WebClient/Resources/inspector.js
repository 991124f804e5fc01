// The inspector at GET /: draws a session's live navigation tree the way a phone would and turns
// every action, binding and dismissal into a control. Everything it knows comes from
// GET /features and the event stream (through /client.js); it holds no state of its own.
//
// For tests and tools, every drawn feature carries its place in the tree as data attributes
// (data-node-id, data-owner + data-index for presentations, data-in-stack + data-index for stack
// elements, data-stack-id + data-owner for stacks, and data-slot, data-style, data-anchor,
// data-feature, data-state, data-alert), so the tree can be read back from the DOM alone.
import { connect, createSession, features as fetchFeatures } from "/client.js";

const $ = (selector) => document.querySelector(selector);
const phone = $("#phone");
const STYLES = ["alert", "confirmationDialog", "sheet", "popover", "fullScreenCover", "drillDown"];
const LABELS = { connecting: "connecting…", open: "connected", reconnecting: "reconnecting…", ended: "ended" };
let catalog = new Map();
let session = null;
let queue = Promise.resolve();

/** An element with attributes and children; `on*` attributes become listeners. */
function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "data") Object.entries(value).forEach(([key, v]) => v !== undefined && (element.dataset[key] = v));
    else element.setAttribute(name, value === true ? "" : value);
  }
  element.append(...children.flat(Infinity).filter((child) => child !== null && child !== undefined && child !== false));
  return element;
}

/** Sends one request at a time, so the server sees them in the order the user made them;
 * `data-pending` on <html> counts those not answered yet. */
function send(what, request) {
  const pending = (change) => (document.documentElement.dataset.pending = Number(document.documentElement.dataset.pending ?? 0) + change);
  pending(1);
  queue = queue.then(async () => {
    try {
      await request();
      $("#error").textContent = "";
    } catch (error) {
      $("#error").textContent = `${what}: ${error.message}`;
    } finally {
      pending(-1);
    }
  });
  return queue;
}

// MARK: - Sessions

async function start() {
  catalog = new Map((await fetchFeatures(location.origin)).features.map((feature) => [feature.name, feature]));
  const select = $("#feature");
  for (const feature of catalog.values()) if (feature.hostable) select.append(h("option", { value: feature.name }, feature.name));
  $("#start").addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = $("#deep-link").value.trim();
    let state;
    try {
      state = text ? JSON.parse(text) : undefined;
    } catch (error) {
      $("#error").textContent = `deep link: ${error.message}`;
      return;
    }
    send("start", async () => {
      const created = await createSession(location.origin, select.value, state);
      remember(created.id);
      location.hash = `session=${created.id}&token=${created.token}`;
    });
  });
  $("#open").addEventListener("submit", (event) => {
    event.preventDefault();
    remember($("#open-id").value.trim());
    location.hash = `session=${encodeURIComponent($("#open-id").value.trim())}&token=${encodeURIComponent($("#open-token").value.trim())}`;
  });
  $("#end").addEventListener("click", () => send("end", () => session.end()));
  document.addEventListener("keydown", onKey);
  document.addEventListener("click", onClickOutside, true);
  window.addEventListener("hashchange", openFromHash);
  openFromHash();
}

function openFromHash() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const id = fragment.get("session");
  const token = fragment.get("token");
  session?.close();
  session = null;
  $("#log").replaceChildren();
  if (!id || !token) return draw();
  if (!known().has(id)) return askBeforeOpening(id);
  $("#session-label").textContent = `session ${id}`;
  $("#share").href = $("#share").textContent = location.href;
  $("#end").disabled = false;
  session = connect(location.origin, { id, token });
  session.subscribe(onChange);
  draw();
}

/** Sessions this tab started, or opened by hand: a link to any other asks first. Whoever made the
 * link holds the token too, and sees, and can answer, whatever is typed into that session (a
 * screen made to look like a password prompt, say). Kept for the tab's life, reloads included. */
const KNOWN_SESSIONS = "navd.inspector.sessions";

function known() {
  try {
    return new Set(JSON.parse(sessionStorage.getItem(KNOWN_SESSIONS) ?? "[]"));
  } catch {
    return new Set();
  }
}

function remember(id) {
  const ids = known().add(id);
  sessionStorage.setItem(KNOWN_SESSIONS, JSON.stringify([...ids]));
}

function askBeforeOpening(id) {
  $("#session-label").textContent = `session ${id} (from a link, not opened)`;
  draw();
  const open = h("button", { id: "open-linked", type: "button" }, "Open it");
  open.addEventListener("click", () => {
    remember(id);
    openFromHash();
  });
  phone.replaceChildren(h("div", { class: "empty" },
    h("p", {}, `This link opens session ${id}, which was not started in this tab. Whoever made the link can see, and answer, anything typed into it.`),
    open));
}

function onChange(change, current) {
  if (current !== session) return;
  if (change.kind === "event") {
    const { id, type, data } = change.event;
    document.documentElement.dataset.lastEventId = id;
    const summary = JSON.stringify(type === "snapshot" ? { version: data.version } : data);
    $("#log").prepend(h("li", { data: { type } }, h("b", {}, `${id} ${type} `), summary.length > 160 ? summary.slice(0, 160) + "…" : summary));
    while ($("#log").children.length > 300) $("#log").lastElementChild.remove();
  } else if (change.kind === "connection") {
    $("#log").prepend(h("li", { class: "muted" }, `connection: ${change.connection}`));
  } else if (change.kind === "error") {
    $("#log").prepend(h("li", { class: "muted" }, `resynchronizing: ${change.error.message}`));
  }
  drawSoon();
}

let drawScheduled = false;

/** One draw for the events that arrive together: a deep link of a long path is one batch of as
 * many events, and a draw per event made it take minutes. A timer, not an animation frame, which
 * a tab in the background never gets. */
function drawSoon() {
  if (drawScheduled) return;
  drawScheduled = true;
  setTimeout(() => {
    drawScheduled = false;
    draw();
  }, 0);
}

// MARK: - Drawing

/** Redraws everything from the mirror, keeping focus and whatever the user is typing. */
function draw() {
  const connection = session?.connection ?? "none";
  const indicator = $("#connection");
  indicator.dataset.connection = connection;
  indicator.textContent = session ? LABELS[connection] + (connection === "ended" && session.endReason ? ` (${session.endReason})` : "") : "not connected";
  $("#end").disabled = !session || connection === "ended";
  const focused = document.activeElement?.dataset?.key;
  const field = document.activeElement?.matches?.("input[type=text], textarea") ? document.activeElement : null;
  const typed = field ? { value: field.value, start: field.selectionStart, end: field.selectionEnd, direction: field.selectionDirection } : null;
  // An action's argument fields hold the user's draft, which no state holds: kept across redraws.
  const drafts = new Map([...phone.querySelectorAll('form.action input[type=text]')].filter((input) => input.value).map((input) => [input.dataset.key, input.value]));
  const tree = session?.tree;
  if (!tree) {
    phone.replaceChildren(h("p", { class: "muted empty" }, session ? "waiting for the first snapshot…" : "Start or open a session."));
    return;
  }
  const overlays = [];
  const column = h("div", { class: "column" });
  drawColumn(tree, column, overlays, { kind: "root" });
  const top = phone.querySelector(":scope > .column > .screen:last-child")?.dataset.nodeId;
  phone.replaceChildren(column, ...overlays);
  placePopovers();
  if (column.lastElementChild.dataset.nodeId !== top) phone.scrollTop = phone.scrollHeight;
  for (const [key, value] of drafts) {
    const input = phone.querySelector(`[data-key="${CSS.escape(key)}"]`);
    if (input) input.value = value;
  }
  const again = focused && phone.querySelector(`[data-key="${CSS.escape(focused)}"]`);
  if (again) {
    if (typed !== null) {
      // The caret too: a field drawn anew would put it at the end, and the next key there.
      again.value = typed.value;
      again.setSelectionRange?.(typed.start, typed.end, typed.direction);
    }
    again.focus();
  } else if (overlays.length && !overlays.at(-1).contains(document.activeElement)) {
    overlays.at(-1).querySelector("button, input, select, textarea")?.focus();
  }
}

/** A screen and, after it in the same column, the screens drilled down from it. */
function drawColumn(node, column, overlays, place) {
  const card = screen(node, place);
  column.append(card);
  node.presentations.forEach((child, index) => {
    const childPlace = { kind: "presentation", owner: node.id, index };
    if (child.style !== "drillDown") return overlays.push(...overlay(child, childPlace));
    drawColumn(child, column, overlays, { ...childPlace, back: () => send("back", () => session.dismiss(child.id)) });
  });
  for (const stack of node.stacks) {
    card.append(h("div", { class: "stack", data: { stackId: stack.id, owner: node.id, slot: stack.slot } },
      `stack ${stack.slot}: ${stack.elements.length} screen(s)`));
    stack.elements.forEach((element, index) => {
      const elementPlace = { kind: "element", stack, index, back: () => send("back", () => session.pop(stack.id)) };
      drawColumn(element, column, overlays, elementPlace);
    });
  }
  // Only the last screen of a column is on top; the others are covered, as on a phone.
  [...column.children].forEach((child, index, all) => child.classList.toggle("covered", index < all.length - 1));
}

/** A modal panel, popover or alert for a presented feature, with its own column inside; then
 * what is presented over it, in the order they stack up. */
function overlay(node, place) {
  const dismiss = () => send("dismiss", () => session.dismiss(node.id));
  const titleID = `title-${node.id}`;
  if (node.style === "alert" || node.style === "confirmationDialog") {
    return [h("div", { class: `backdrop ${node.style}` },
      h("div", { class: "dialog", role: "alertdialog", "aria-modal": "true", "aria-labelledby": titleID, data: { dismiss: node.id } },
        screen(node, place, titleID)))];
  }
  const column = h("div", { class: "column" });
  const inner = [];
  drawColumn(node, column, inner, place);
  const panel = h("div", {
    class: `panel-${node.style}`, role: "dialog", "aria-modal": node.style === "popover" ? "false" : "true",
    "aria-labelledby": titleID, data: { dismiss: node.id, anchorFor: node.anchor },
  }, h("button", { class: "close", type: "button", "aria-label": `Close ${node.feature}`, data: { key: `close-${node.id}` }, onclick: dismiss }, "✕"), column);
  column.querySelector("h3")?.setAttribute("id", titleID);
  if (node.style === "popover") return [panel, ...inner];
  // A tap on the dimmed area around a sheet is the swipe that dismisses it; a cover has none.
  const backdrop = h("div", { class: `backdrop ${node.style}` }, panel);
  if (node.style === "sheet") backdrop.addEventListener("click", (event) => event.target === backdrop && dismiss());
  return [backdrop, ...inner];
}

/** One feature's screen: a navigation bar, its state, its bindings and its actions. */
function screen(node, place, titleID) {
  const description = catalog.get(node.feature) ?? { actions: [], bindings: [], state: [], stacks: [] };
  const data = {
    nodeId: node.id, feature: node.feature, slot: node.slot, style: node.style, anchor: node.anchor,
    state: JSON.stringify(node.state), alert: node.alert ? JSON.stringify(node.alert) : undefined,
    owner: place.kind === "presentation" ? place.owner : undefined,
    inStack: place.kind === "element" ? place.stack.id : undefined,
    index: place.kind === "root" ? undefined : String(place.index),
  };
  const bar = h("div", { class: "bar" },
    place.back ? h("button", { type: "button", class: "back", data: { key: `back-${node.id}` }, onclick: place.back }, "‹ Back") : null,
    place.kind === "element" ? backMenu(place.stack, node.id) : null,
    h("h3", { id: titleID }, node.feature, node.slot ? h("small", {}, ` ${node.slot} · ${node.id}`) : h("small", {}, ` ${node.id}`)));
  const card = h("section", { class: "screen", data, "aria-label": `${node.feature} ${node.id}` }, bar);
  if (node.alert) card.append(alertBody(node));
  const bindings = new Set(description.bindings);
  const fields = h("dl", { class: "fields" });
  for (const [name, value] of Object.entries(node.state)) {
    const type = description.state.find((field) => field.name === name)?.type ?? "";
    fields.append(h("dt", {}, name), h("dd", {}, bindings.has(name) ? bindingInput(node, name, value, type) : format(value)));
  }
  if (fields.children.length) card.append(fields);
  for (const child of node.presentations) {
    if (child.style === "popover") card.append(h("span", { class: "anchor", data: { anchor: child.anchor ?? child.id } }, `⌖ ${child.anchor ?? "anchor"}`));
  }
  const actions = h("div", { class: "actions" }, description.actions.map((action) => actionControl(node, action)));
  const accepts = place.kind === "element" ? acceptsOf(place.stack) : description.stacks.flatMap((stack) => stack.accepts);
  for (const feature of new Set(accepts)) {
    actions.append(h("button", { type: "button", data: { key: `push-${node.id}-${feature}` },
      onclick: () => send("push", () => session.push(node.id, { [feature]: {} })) }, `Push ${feature}`));
  }
  if (actions.children.length) card.append(actions);
  return card;
}

function alertBody(node) {
  const { title, message, buttons } = node.alert;
  return h("div", { class: "alert" }, h("p", { class: "alert-title" }, title), message ? h("p", {}, message) : null,
    h("div", { class: "alert-buttons" }, buttons.map((button) => h("button", {
      type: "button", class: button.role ?? "default", data: { key: `button-${node.id}-${button.id}`, button: button.id },
      onclick: () => send(button.label, () => session.dismiss(node.id, { button: button.id })),
    }, button.label))));
}

/** A bound field: a checkbox for a Bool, a text or number field otherwise; sent as the user types. */
function bindingInput(node, name, value, type) {
  const key = `bind-${node.id}-${name}`;
  const write = (next) => send(`binding ${name}`, () => session.bind(node.id, name, next));
  if (typeof value === "boolean") {
    return h("input", { type: "checkbox", checked: value, "aria-label": name, data: { key }, onchange: (event) => write(event.target.checked) });
  }
  const numeric = typeof value === "number" || type === "integer" || type === "number";
  const input = h("input", { type: "text", inputmode: numeric ? "decimal" : undefined, "aria-label": name, data: { key } });
  input.value = value ?? "";
  input.addEventListener("input", () => {
    if (!numeric) return write(input.value);
    if (input.value.trim() !== "" && Number.isFinite(Number(input.value))) write(Number(input.value));
  });
  return input;
}

/** An action: a button, with a field (and suggestions) for each argument it takes. */
function actionControl(node, action) {
  const key = `action-${node.id}-${action.name}`;
  if (!action.arguments.length) {
    return h("button", { type: "button", data: { key }, onclick: () => send(action.name, () => session.perform(node.id, action.name)) }, action.name);
  }
  const inputs = action.arguments.map((argument) => {
    const list = `list-${node.id}-${action.name}-${argument.name}`;
    return [h("input", { type: "text", name: argument.name, placeholder: argument.name, "aria-label": `${action.name} ${argument.name}`, list, data: { key: `${key}-${argument.name}` } }),
      h("datalist", { id: list }, suggestions(node, argument).map((value) => h("option", { value })))];
  });
  return h("form", {
    class: "action", onsubmit: (event) => {
      event.preventDefault();
      const args = Object.fromEntries(action.arguments.map((argument) => {
        const text = event.target.elements[argument.name].value;
        return [argument.name, argument.type === "integer" || argument.type === "number" ? Number(text) : argument.type === "boolean" ? text === "true" : text];
      }));
      send(action.name, () => session.perform(node.id, action.name, args));
    },
  }, inputs, h("button", { type: "submit", data: { key } }, action.name));
}

function suggestions(node, argument) {
  if (argument.name === "style") return STYLES;
  return Object.values(node.state).flatMap((value) => (Array.isArray(value) ? value.map((item) => item?.id).filter((id) => typeof id === "string") : []));
}

/**
 * The long-press back menu of a stack element: back to the start, or to any screen before it.
 * Its buttons are made when it opens: made for every element of a long path at every draw, they
 * would grow with the square of its length.
 */
function backMenu(stack, current) {
  const menu = h("details", {
    class: "back-menu", ontoggle: () => {
      if (!menu.open || menu.querySelector("button")) return;
      const earlier = stack.elements.slice(0, stack.elements.findIndex((element) => element.id === current));
      menu.append(
        h("button", { type: "button", data: { key: `popall-${current}` }, onclick: () => send("back", () => session.pop(stack.id, { count: stack.elements.length })) }, "Back to the start"),
        ...earlier.map((element) => h("button", {
          type: "button", data: { key: `popto-${current}-${element.id}`, popTo: element.id },
          onclick: () => send("back", () => session.pop(stack.id, { to: element.id })),
        }, `Back to ${element.feature} ${element.id}`)));
    },
  }, h("summary", { "aria-label": "Back to…" }, "⋯"));
  return menu;
}

function acceptsOf(stack) {
  for (const feature of catalog.values()) {
    const found = feature.stacks.find((candidate) => candidate.slot === stack.slot);
    if (found) return found.accepts;
  }
  return [];
}

function format(value) {
  if (Array.isArray(value)) return h("ul", {}, value.map((item) => h("li", {}, item !== null && typeof item === "object" ? Object.values(item).map(String).join(" · ") : String(item))));
  return value !== null && typeof value === "object" ? JSON.stringify(value) : String(value);
}

/** Popovers sit under their anchor, inside the phone. */
function placePopovers() {
  const frame = phone.getBoundingClientRect();
  for (const panel of phone.querySelectorAll(".panel-popover")) {
    const anchor = phone.querySelector(`.screen[data-node-id="${CSS.escape(panel.querySelector(".screen").dataset.owner)}"] .anchor[data-anchor="${CSS.escape(panel.dataset.anchorFor ?? "")}"]`);
    const box = anchor?.getBoundingClientRect() ?? { left: frame.left + 20, bottom: frame.top + 60 };
    const left = box.left - frame.left - phone.clientLeft + phone.scrollLeft;
    panel.style.left = `${Math.max(4, Math.min(left, phone.clientWidth - panel.offsetWidth - 4))}px`;
    panel.style.top = `${box.bottom - frame.top - phone.clientTop + phone.scrollTop + 6}px`;
  }
}

// MARK: - Dismissals as a user makes them

/** Escape closes what is on top: an alert by its cancel button, anything else by a dismissal. */
function onKey(event) {
  if (event.key !== "Escape" || !session?.tree) return;
  const top = [...phone.querySelectorAll("[data-dismiss]")].at(-1);
  if (!top) return;
  event.preventDefault();
  const node = session.mirror.find(top.dataset.dismiss);
  const cancel = node?.alert?.buttons.find((button) => button.role === "cancel");
  send("dismiss", () => session.dismiss(top.dataset.dismiss, cancel ? { button: cancel.id } : {}));
}

/** A tap outside the topmost popover dismisses it (unless something modal is above it). */
function onClickOutside(event) {
  const top = [...phone.querySelectorAll("[data-dismiss]")].at(-1);
  if (!phone.contains(event.target) || !top?.classList.contains("panel-popover") || top.contains(event.target)) return;
  event.preventDefault();
  event.stopPropagation();
  send("dismiss", () => session.dismiss(top.dataset.dismiss));
}

start().catch((error) => {
  $("#error").textContent = `cannot start: ${error.message}`;
});
