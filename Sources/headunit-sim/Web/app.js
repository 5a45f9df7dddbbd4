// headunitd simulator page. State arrives as protobuf JSON (proto3: default
// values are omitted, enums by name, 64-bit integers as strings); every input
// is sent back as an HMI (or cluster) request envelope in the same JSON.
"use strict";

const S = {
  ws: null, wsUp: false, reqId: 0, pending: {},
  daemon: null,          // {connected, welcome, error}
  home: null,            // HomeScreen
  screens: {},           // SCREEN_* -> RenderedScreen
  meta: {},              // MetadataState
  vehicle: { driving: false, contentStyle: "CONTENT_STYLE_DARK", nativeNavigationActive: false },
  rhd: false, rhdTouched: false,
  searchText: "",
  focusIndex: 0,
};
const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------- transport

function connect() {
  const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
  S.ws = ws;
  ws.binaryType = "arraybuffer";  // the car's output (onAudioChunk); video comes on the Worker's own socket
  ws.onopen = () => { S.wsUp = true; badge("conn-page", "page: connected", "ok"); banner(); };
  ws.onmessage = (e) => {
    if (typeof e.data !== "string") {
      if (e.data.byteLength > 12 && new DataView(e.data).getUint8(0) === 2) onAudioChunk(e.data);
      return;
    }
    try { receive(JSON.parse(e.data)); } catch (err) { console.error(err, e.data); }
  };
  ws.onclose = () => {
    S.wsUp = false;
    badge("conn-page", "page: simulator gone, reconnecting…", "bad");
    banner();
    for (const id in S.pending) { S.pending[id]({ error: "simulator connection lost" }); delete S.pending[id]; }
    setTimeout(connect, 1000);
  };
}

// Sends one request envelope to the daemon through the simulator; resolves with
// {result, code} or {error}.
function request(to, envelope) {
  if (!S.wsUp) { toast("not connected to the simulator"); return Promise.resolve({ error: "not connected" }); }
  const id = ++S.reqId;
  S.ws.send(JSON.stringify({ id, to, envelope }));
  return new Promise((resolve) => { S.pending[id] = resolve; }).then((answer) => {
    if (answer.error) toast(answer.error);
    else if (answer.code !== "OK") toast(answer.code + (answer.result && answer.result.message ? ": " + answer.result.message : ""));
    return answer;
  });
}
const hmi = (body) => request("hmi", body);
const hmiInput = (templateId, kind) => hmi({ hmiInput: Object.assign({ templateId }, kind) });
const navInput = (kind) => hmi({ navigationInput: kind });

function receive(m) {
  switch (m.type) {
    case "daemon":
      S.daemon = m;
      if (!m.connected) { S.home = null; S.screens = {}; S.meta = {}; }
      else {
        const v = (m.welcome && m.welcome.vehicle) || {};
        $("vehicle-name").textContent = [v.manufacturer, v.model].filter(Boolean).join(" ");
        if (!S.rhdTouched) { S.rhd = !!v.rightHandDrive; $("ctl-rhd").checked = S.rhd; }
        hmi({ getStatus: {} }).then((a) => {
          const vs = a.result && a.result.status && a.result.status.vehicleState;
          if (vs) { S.vehicle = Object.assign({ contentStyle: S.vehicle.contentStyle }, vs); syncControls(); render(); }
        });
      }
      break;
    case "home": S.home = m.home; onNotifications(); break;
    case "screen": S.screens[m.screen] = m.rendered; if (m.screen === "SCREEN_MAIN") onMainScreen(m); break;
    case "metadata": S.meta = m.state || {}; break;
    case "video": onVideoStreams(m); break;
    case "log": addLog(m); return;
    case "notice": addLog({ dir: "in", peer: "sim", name: m.text }); return;
    case "result": { const p = S.pending[m.id]; if (p) { delete S.pending[m.id]; p(m); } return; }
  }
  render();
}

function onMainScreen(m) {
  const r = m.rendered || {};
  if (r.contentStyle) S.vehicle.contentStyle = r.contentStyle;
  if (!S.rhdTouched && "rightHandDrive" in r) S.rhd = !!r.rightHandDrive;
  syncControls();
}

// ---------------------------------------------------------------- helpers

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "style") el.setAttribute("style", v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
// A focusable, clickable element for the knob/touchpad navigation.
function tap(tag, attrs, fn, ...children) {
  const disabled = attrs && attrs.disabled;
  return h(tag, Object.assign({ "data-focus": disabled ? null : "1", tabindex: disabled ? null : "0",
    onclick: disabled ? null : (e) => { e.stopPropagation(); fn(); } }, attrs || {}), ...children);
}
const first = (variants) => (variants && variants.length ? variants[0] : "");
const dark = () => S.vehicle.contentStyle !== "CONTENT_STYLE_LIGHT";

// Images: PNGs are shown; assets (names in the phone's catalogue) as a labelled tile.
// The car sends each PNG once and names it by ref (PROTOCOL.md 12.6); the bridge's
// HMI session puts the bytes back, so a ref shows only while its bytes are on the way.
function image(img, size, alt) {
  size = size || 40;
  // Drawn at the image's own aspect, fitted into the size the car gives this use
  // (a 240x36 lane strip stays a strip); a square when the size is unknown.
  let w = size, hgt = size;
  if (img && img.widthPx && img.heightPx) {
    if (img.widthPx >= img.heightPx) hgt = Math.max(4, Math.round(size * img.heightPx / img.widthPx));
    else w = Math.max(4, Math.round(size * img.widthPx / img.heightPx));
  }
  const box = h("span", { class: "img", style: `width:${w}px;height:${hgt}px`, title: alt || "" });
  if (!img) return box;
  if (img.png) box.append(h("img", { src: "data:image/png;base64," + img.png, alt: alt || "" }));
  else if (img.asset) {
    const name = (dark() && img.darkAsset) || img.asset;
    box.title = "asset " + name;
    // A flat strip keeps the name in its tooltip; one a line tall shows it on one line, cut with an ellipsis.
    if (hgt >= 14) box.textContent = name;
    if (hgt < 24) box.classList.add(hgt >= 14 ? "one-line" : "flat");
  }
  else if (img.ref) { box.textContent = "…"; box.title = "image " + img.ref.slice(0, 12) + " (loading)"; }
  return box;
}
// The name under the app's icon (the home screen's), for places that name an app.
function appName(appId) {
  const icon = S.home && (S.home.icons || []).find((i) => i.appId === appId);
  return (icon && icon.displayName) || appId;
}
function iconColor(s) { let x = 0; for (const c of s || "") x = (x * 31 + c.charCodeAt(0)) >>> 0; return `hsl(${x % 360},55%,42%)`; }
const fmtClock = (s) => { s = Math.max(0, Math.floor(s || 0)); return Math.floor(s / 60) + ":" + String(s % 60).padStart(2, "0"); };
const fmtDist = (m) => (m >= 1000 ? (m / 1000).toFixed(1) + " km" : Math.round(m || 0) + " m");
const fmtTime = (s) => { s = s || 0; return s >= 3600 ? `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min` : s < 60 ? "<1 min" : `${Math.floor(s / 60)} min`; };
const fmtEst = (e) => (e ? `${fmtDist(e.distanceRemainingM)} · ${fmtTime(e.timeRemainingS)}` : "");

// A maneuver symbol from its instruction (the car has no asset catalogue of the app's symbols).
function maneuverGlyph(m) {
  const t = (first(m.instructionVariants) || "").toLowerCase();
  if (/u-turn|u turn/.test(t)) return "↶";
  if (/roundabout/.test(t)) return "⟳";
  if (/left/.test(t)) return "↰";
  if (/right/.test(t)) return "↱";
  if (/arriv|destination/.test(t)) return "⚑";
  return "↑";
}

// ---------------------------------------------------------------- rendering

function render() {
  renderStatus();
  renderAudio();
  renderMain();
  renderNotifications();
  renderDashboard();
  renderCluster();
  document.body.classList.toggle("light", !dark());
  document.body.classList.toggle("dark", dark());
}

function badge(id, text, cls) { const b = $(id); b.textContent = text; b.className = "badge " + (cls || ""); }

function banner() {
  const b = $("banner");
  let text = "", warn = false;
  if (!S.wsUp) text = "The simulator is not reachable: reconnecting…";
  else if (S.daemon && !S.daemon.connected) text = "headunitd is not reachable (" + (S.daemon.error || "") + "): reconnecting by itself…";
  else if (S.daemon && S.home && !S.home.deviceName) { text = "No phone connected: waiting for a phone…"; warn = true; }
  b.hidden = !text; b.textContent = text; b.className = warn ? "warn" : "";
}

function renderStatus() {
  if (!S.daemon) badge("conn-daemon", "daemon: ?", "");
  else if (S.daemon.connected) badge("conn-daemon", "daemon: connected", "ok");
  else badge("conn-daemon", "daemon: reconnecting…", "bad");
  if (S.home && S.home.deviceName) badge("conn-phone", "phone: " + S.home.deviceName, "ok");
  else badge("conn-phone", "phone: none", S.daemon && S.daemon.connected ? "warn" : "");
  banner();
}

function renderMain() {
  const root = $("main-screen");
  const focused = document.activeElement && root.contains(document.activeElement) ? focusList().indexOf(document.activeElement) : -1;
  root.replaceChildren();
  root.classList.toggle("light", !dark());
  root.classList.toggle("rhd", S.rhd);
  const r = S.screens.SCREEN_MAIN || {};
  root.dataset.app = r.appId || "";
  const dock = h("div", { class: "dock" },
    tap("button", { id: "dock-home", title: "Home" }, goHome, "Home"),
    (S.home && S.home.nowPlayingAppId) || r.showNowPlayingButton
      ? tap("button", { id: "dock-nowplaying", title: "Now Playing" }, openNowPlaying, "Now Playing") : null);
  const content = h("div", { class: "content" });
  root.append(dock, content);
  const calls = callBanner();
  if (calls) root.append(calls);
  const assistant = assistantPanel();
  if (assistant) root.append(assistant);
  const banner = navBanner(r) || notificationBanner();
  if (banner) root.append(banner);

  if (!S.daemon || !S.daemon.connected) {
    content.append(h("div", { class: "home-empty" }, "headunitd is not connected"));
  } else if (!r.appId) {
    content.append(renderHome());
  } else {
    renderApp(content, r);
  }
  // The app's map under everything the car draws, while its map template is on top.
  const stream = V.streams.SCREEN_MAIN;
  const layer = stream && r.appId === stream.appId && kindOf(r.top || {}) === "map" && !(r.presented && r.presented.id) ? videoLayer("SCREEN_MAIN") : null;
  root.classList.toggle("has-video", !!layer);
  if (layer) root.prepend(...layer);
  if (focused >= 0) { const list = focusList(); (list[Math.min(focused, list.length - 1)] || root).focus(); }
}

// Navigation banners (PROTOCOL.md 19.9): a navigation app that is not on the
// main screen shows its maneuver or alert at the top; a tap selects it (the
// car brings the app's map back and the banner goes).
function navBanner(r) {
  const b = S.meta.banner;
  if (!b || !b.appId || b.appId === r.appId) return null;
  const symbol = b.symbol ? image(b.symbol, 40) : h("span", { class: "glyph" }, b.alertId ? "⚠" : maneuverGlyph(b));
  return tap("button", { class: "nav-banner", id: "nav-banner", "data-banner-id": b.bannerId || "" },
    () => navInput({ appId: b.appId, selectBanner: { bannerId: b.bannerId } }),
    symbol, h("div", { class: "text" }, h("b", {}, first(b.instructionVariants)),
      h("div", { class: "muted" }, [appName(b.appId), first(b.subtitleVariants), fmtEst(b.estimates)].filter(Boolean).join(" · "))));
}

// Calls (PROTOCOL.md section 26): the phone's calls over whatever the screen
// shows, with the buttons the car would accept now (available_actions); a
// press is a CallInput the app fulfils or fails.
function callAction(call, kind, extra) {
  const action = Object.assign({ kind: "CALL_ACTION_KIND_" + kind, callUuid: call.callUuid }, extra || {});
  return hmi({ callInput: { action } }).then((answer) => {
    const o = answer.result && answer.result.callAction;
    S.callOutcome = o ? `${kind.toLowerCase()}: ${o.fulfilled ? "done" : "the app failed it"}` : (answer.code || answer.error || "");
    const el = $("call-status"); if (el) el.textContent = S.callOutcome;
    return answer;
  });
}
function callBanner() {
  const calls = (S.home && S.home.calls) || [];
  if (!calls.length) return null;
  const box = h("div", { class: "calls", id: "calls" });
  for (const call of calls) {
    const d = call.description || {};
    const who = d.localizedCallerName || (d.remoteHandle && d.remoteHandle.value) || "Unknown";
    const phase = (call.phase || "").replace("CALL_PHASE_", "").toLowerCase();
    const can = new Set((call.availableActions || []).map((a) => a.replace("CALL_ACTION_KIND_", "")));
    const state = [call.onHold ? "on hold" : phase, call.muted ? "muted" : ""].filter(Boolean).join(", ");
    box.append(h("div", { class: "call " + phase, "data-call-uuid": call.callUuid },
      h("div", { class: "call-who" }, who),
      h("div", { class: "call-state" }, `${call.appDisplayName || call.appId} · ${call.outgoing ? "outgoing" : "incoming"} · ${state}`),
      h("div", { class: "call-buttons" },
        can.has("ANSWER") ? tap("button", { class: "call-answer", "data-focus": "" }, () => callAction(call, "ANSWER"), "Answer") : null,
        can.has("END") ? tap("button", { class: "call-end", "data-focus": "" }, () => callAction(call, "END"), phase === "ringing" ? "Decline" : "End") : null,
        can.has("SET_MUTED") ? tap("button", { class: "call-mute", "data-focus": "" }, () => callAction(call, "SET_MUTED", { muted: !call.muted }), call.muted ? "Unmute" : "Mute") : null,
        can.has("SET_HELD") ? tap("button", { class: "call-hold", "data-focus": "" }, () => callAction(call, "SET_HELD", { onHold: !call.onHold }), call.onHold ? "Resume" : "Hold") : null)));
  }
  box.append(h("div", { class: "call-status", id: "call-status" }, S.callOutcome || ""));
  return box;
}

// The phone's assistant (PROTOCOL.md section 27): the car draws its state
// and the exchange over whatever the main screen shows; the voice button and
// the say box are the driver's side. The notifications (27.7) are listed
// beside the controls; selecting one has the assistant read it.
function voiceButton() {
  return hmi({ carButton: { button: "CAR_BUTTON_VOICE" } }).then(showVoiceOutcome);
}
function say(text) {
  return hmi({ assistantInput: { say: { text } } }).then(showVoiceOutcome);
}
function endAssistant() {
  return hmi({ assistantInput: { end: {} } }).then(showVoiceOutcome);
}
function showVoiceOutcome(answer) {
  const o = answer.result && answer.result.assistant;
  $("voice-result").textContent = o ? `session ${o.sessionId}${o.ended ? " ended" : ""}` : (answer.code || answer.error || "");
  return answer;
}
// The exchange stays drawn after its session ended (as the car's own
// screen lets an answer be read) until another opens or Done is pressed.
function assistantPanel() {
  const open = S.home && S.home.assistant && S.home.assistant.sessionId ? S.home.assistant : null;
  if (open) S.lastAssistant = open;
  const a = open || S.lastAssistant;
  if (!a) return null;
  const ended = S.home && S.home.lastAssistantEnded;
  const state = open ? (a.state || "").replace("ASSISTANT_STATE_", "").toLowerCase()
    : "ended" + (ended && ended.sessionId === a.sessionId ? " (" + (ended.reason || "").replace("ASSISTANT_END_REASON_", "").toLowerCase() + ")" : "");
  const done = () => { if (open) return endAssistant(); S.lastAssistant = null; render(); };
  return h("div", { class: "assistant " + state.split(" ")[0], id: "assistant", "data-state": state.split(" ")[0], "data-session-id": a.sessionId },
    h("div", { class: "assistant-state" }, "Assistant · " + state + (a.appId ? " · " + appName(a.appId) : "")),
    ...(a.turns || []).map((t) => h("div", { class: "turn " + (t.fromDriver ? "driver" : "reply") }, t.text || "")),
    tap("button", { id: "assistant-end", "data-focus": "" }, done, open ? "Done" : "Close"));
}
function notificationAction(action) {
  return hmi({ notificationInput: action }).then(showVoiceOutcome);
}
// A notification that arrives shows as a banner over the main screen for
// 5 s (the list keeps it); a tap selects it.
function onNotifications() {
  const newest = ((S.home && S.home.notifications) || [])[0];
  const key = newest ? newest.appId + "/" + newest.notificationId : "";
  if (key && key !== S.newestNotification) {
    S.notificationBanner = newest;
    clearTimeout(S.notificationBannerTimer);
    S.notificationBannerTimer = setTimeout(() => { S.notificationBanner = null; render(); }, 5000);
  }
  S.newestNotification = key;
  const held = new Set(((S.home && S.home.notifications) || []).map((n) => n.appId + "/" + n.notificationId));
  if (S.notificationBanner && !held.has(S.notificationBanner.appId + "/" + S.notificationBanner.notificationId)) S.notificationBanner = null;
}
function notificationBanner() {
  const n = S.notificationBanner;
  if (!n) return null;
  const kind = n.category === "NOTIFICATION_CATEGORY_MISSED_CALL" ? "Missed call" : "Message";
  return tap("button", { class: "nav-banner notification-banner", id: "notification-banner", "data-notification-id": n.notificationId },
    () => notificationAction({ select: { appId: n.appId, notificationId: n.notificationId } }),
    h("span", { class: "glyph" }, n.category === "NOTIFICATION_CATEGORY_MISSED_CALL" ? "☎" : "✉"),
    h("div", { class: "text" }, h("b", {}, n.sender || ""), h("div", { class: "muted" }, [kind, n.group, n.appDisplayName || appName(n.appId)].filter(Boolean).join(" · "))));
}

function renderNotifications() {
  const box = $("notifications");
  const list = (S.home && S.home.notifications) || [];
  const off = new Set((S.home && S.home.notificationsOff) || []);
  box.replaceChildren();
  if (!list.length) box.append("none");
  for (const n of list) {
    const ref = { appId: n.appId, notificationId: n.notificationId };
    const kind = n.category === "NOTIFICATION_CATEGORY_MISSED_CALL" ? "missed call" : "message";
    box.append(h("div", { class: "notification", "data-notification-id": n.notificationId },
      h("button", { type: "button", class: "open" }, `${n.appDisplayName || n.appId}: ${kind} from ${n.sender}${n.group ? " (" + n.group + ")" : ""}`),
      h("button", { type: "button", class: "dismiss", title: "dismiss" }, "×"),
      h("button", { type: "button", class: "off", title: "turn this app's notifications off" }, "off")));
    const row = box.lastChild;
    row.querySelector(".open").addEventListener("click", () => notificationAction({ select: ref }));
    row.querySelector(".dismiss").addEventListener("click", () => notificationAction({ dismiss: ref }));
    row.querySelector(".off").addEventListener("click", () => notificationAction({ allow: { appId: n.appId, allowed: false } }));
  }
  for (const appId of off) {
    box.append(h("div", { class: "notification off-app" },
      h("button", { type: "button", class: "on", "data-app-id": appId }, `turn ${appName(appId)}'s notifications on`)));
    box.lastChild.querySelector(".on").addEventListener("click", () => notificationAction({ allow: { appId, allowed: true } }));
  }
}

function renderHome() {
  const home = S.home || {};
  const grid = h("div", { class: "home", id: "home" });
  if (!home.deviceName) grid.append(h("div", { class: "home-empty" }, "No phone connected"));
  for (const icon of home.icons || []) {
    grid.append(tap("button", { class: "app-icon", "data-app-id": icon.appId, title: icon.appId }, () => launch(icon.appId),
      icon.icon && (icon.icon.png || icon.icon.asset || icon.icon.ref) ? image(icon.icon, 64, icon.displayName)
        : h("span", { class: "glyph", style: "background:" + iconColor(icon.appId) }, (icon.displayName || "?")[0]),
      h("span", { class: "label" }, icon.displayName || icon.appId),
      icon.running ? h("span", { class: "running" }, "● running") : null));
  }
  return grid;
}

function launch(appId, kind) {
  return hmi({ launchApp: { appId, kind: kind || "SCENE_KIND_MAIN" } });
}
function goHome() { return hmiInput("", { goHome: {} }); }
function openNowPlaying() { return hmiInput("", { openNowPlaying: {} }); }
function goBack() {
  const r = S.screens.SCREEN_MAIN || {};
  if (!r.appId) return;
  return hmiInput(r.top ? r.top.id : "", { goBack: {} });
}

function kindOf(t) {
  for (const k of ["list", "grid", "tabBar", "nowPlaying", "alert", "actionSheet", "information", "pointOfInterest", "contact", "map", "search", "voiceControl"]) {
    if (t && t[k] !== undefined) return k;
  }
  return "unknown";
}

function renderApp(content, r) {
  // The app's remote commands travel with its now-playing screen (PROTOCOL.md section 23).
  S.remote = { appId: r.appId, commands: (r.remoteCommands || {}).commands || [] };
  const top = r.top || {};
  const kind = kindOf(top);
  let shown = top, selectedTab = null;
  if (kind === "tabBar") {
    window.simRendered.tabBar = (window.simRendered.tabBar || 0) + 1;
    const tabs = top.tabBar.tabs || [];
    const sel = r.selectedTabId || top.tabBar.selectedTabId || (tabs[0] && tabs[0].id);
    selectedTab = tabs.find((t) => t.id === sel) || tabs[0];
    shown = (selectedTab && selectedTab.template) || {};
  }
  const t = shown[kindOf(shown)] || {};
  // Now Playing's title is the song's, shown under the artwork: the bar names the app.
  const title = kindOf(shown) === "nowPlaying" ? appName(r.appId) : t.title || (selectedTab && selectedTab.title) || "";
  const depth = (r.stack || []).length;
  // The navigation bar: back (pops, or goes home at the root), leading and trailing bar buttons.
  if (kindOf(shown) !== "map" && kindOf(shown) !== "nowPlaying" || depth > 1) {
    content.append(h("div", { class: "navbar" },
      depth > 1 ? tap("button", { class: "barbtn", id: "back" }, goBack, "‹ Back") : null,
      (t.leadingButtons || []).map((b) => barButton(b, shown.id)),
      h("div", { class: "title", id: "nav-title" }, title),
      (t.trailingButtons || []).map((b) => barButton(b, shown.id)),
      r.showNowPlayingButton ? tap("button", { class: "barbtn" }, openNowPlaying, "♫") : null));
  }
  if (r.itemsTotal && r.itemsShown !== undefined && r.itemsShown < r.itemsTotal) {
    content.append(h("div", { class: "note", id: "truncation" }, `Showing ${r.itemsShown || 0} of ${r.itemsTotal} items while driving`));
  }
  const body = h("div", { class: "body", id: "template", "data-template-id": shown.id || "", "data-kind": kindOf(shown) });
  content.append(body);
  body.append(renderTemplate(shown, r));
  if (kind === "tabBar") {
    content.append(h("div", { class: "tabbar" }, (top.tabBar.tabs || []).map((tab) =>
      tap("button", { class: "tab" + (tab === selectedTab ? " selected" : ""), "data-tab-id": tab.id },
        () => hmiInput(top.id, { selectTab: { tabId: tab.id } }),
        tab.image ? image(tab.image, 20) : null,
        tab.title || (tab.systemItem || "").replace("SYSTEM_TAB_ITEM_", "").toLowerCase(),
        tab.badge || tab.showUnreadDot ? h("span", { class: "tab-badge" }, tab.badge || "•") : null))));
  }
  if (r.presented && r.presented.id) content.append(renderModal(r.presented));
  const alert = S.meta.alert;
  if (alert && alert.alert && (!alert.appId || alert.appId === r.appId)) content.append(renderNavAlert(alert.alert));
}

function barButton(b, templateId) {
  return tap("button", { class: "barbtn", disabled: b.disabled, "data-button-id": b.id },
    () => hmiInput(templateId, { pressButton: { buttonId: b.id } }),
    b.image && !b.title ? image(b.image, 20, b.id) : b.title || b.id);
}
function textButton(b, templateId, extra) {
  const style = (b.style || "").replace("BUTTON_STYLE_", "").toLowerCase();
  return tap("button", Object.assign({ class: "btn " + style, "data-button-id": b.id }, extra || {}),
    () => hmiInput(templateId, { pressButton: { buttonId: b.id } }), b.title || b.id);
}

// Template kinds drawn so far, and page errors: read by the browser test.
window.simRendered = window.simRendered || {};
window.simErrors = window.simErrors || [];
window.addEventListener("error", (e) => window.simErrors.push(String(e.message)));

function renderTemplate(tpl, r) {
  const k = kindOf(tpl), t = tpl[k] || {};
  window.simRendered[k] = (window.simRendered[k] || 0) + 1;
  switch (k) {
    case "list": return renderList(tpl.id, t, r);
    case "grid": return h("div", { class: "grid" }, (t.buttons || []).map((b) =>
      tap("button", { class: "grid-btn", disabled: b.disabled, "data-button-id": b.id },
        () => hmiInput(tpl.id, { pressButton: { buttonId: b.id } }), image(b.image, 48, b.id), first(b.titleVariants))));
    case "nowPlaying": return renderNowPlaying(tpl.id, t);
    case "information": return h("div", { class: "info" + (t.layout === "INFORMATION_LAYOUT_TWO_COLUMN" ? " two-column" : "") },
      h("div", { class: "items" }, (t.items || []).map((i) => h("div", { class: "info-item", "data-item-id": i.id },
        h("div", { class: "t" }, i.title || ""), h("div", {}, i.detail || "")))),
      h("div", { class: "actions" }, (t.actions || []).map((a) => textButton(a, tpl.id))));
    case "contact": return h("div", { class: "contact" }, image(t.image, 72, t.title),
      h("h3", {}, t.title || ""), h("div", { class: "muted" }, t.subtitle || ""),
      (t.informativeTexts || []).map((x) => h("div", {}, x)),
      h("div", { class: "actions" }, (t.actions || []).map((a) => tap("button", { class: "btn", "data-button-id": a.id },
        () => hmiInput(tpl.id, { pressButton: { buttonId: a.id } }),
        a.title || (a.kind || "CONTACT_ACTION_KIND_CUSTOM").replace("CONTACT_ACTION_KIND_", "").toLowerCase()))));
    case "pointOfInterest": return renderPOI(tpl.id, t);
    case "map": return renderMap(tpl.id, t, r);
    case "search": return renderSearch(tpl.id, t, r);
    case "alert": case "actionSheet": case "voiceControl": return renderModalBody(tpl);
    default: return h("div", { class: "empty-view" }, "(no template)");
  }
}

function renderList(templateId, t, r) {
  const wrap = h("div", { class: "list" });
  const sections = t.sections || [];
  const count = sections.reduce((n, s) => n + (s.items || []).length, 0);
  if (!count) {
    wrap.append(h("div", { class: "empty-view" }, h("div", {}, first(t.emptyViewTitleVariants) || "No items"), h("div", {}, first(t.emptyViewSubtitleVariants))));
    return wrap;
  }
  const pending = r.pending && r.pending.templateId === templateId ? r.pending.itemId : null;
  const ask = assistantCell(t, r);
  if (ask && !(t.assistantCell.position === "ASSISTANT_CELL_POSITION_BOTTOM")) wrap.append(ask);
  for (const s of sections) {
    if (s.header) wrap.append(h("div", { class: "section-header" }, s.header));
    for (const item of s.items || []) wrap.append(listItem(templateId, item, pending === item.id));
  }
  if (ask && t.assistantCell.position === "ASSISTANT_CELL_POSITION_BOTTOM") wrap.append(ask);
  return wrap;
}

// The "Ask Siri" row (ListTemplate.assistant_cell): always, or while the
// limited UI is on; selected, the assistant opens for the app (27.2).
function assistantCell(t, r) {
  const cell = t.assistantCell;
  if (!cell) return null;
  const visibility = cell.visibility || "ASSISTANT_CELL_VISIBILITY_OFF";
  if (visibility === "ASSISTANT_CELL_VISIBILITY_OFF" || (visibility === "ASSISTANT_CELL_VISIBILITY_WHILE_LIMITED_UI_ACTIVE" && !S.vehicle.driving)) return null;
  return h("div", { class: "item assistant-cell", id: "assistant-cell" },
    tap("div", { class: "text", "data-focus": "" },
      () => hmi({ assistantInput: { start: { appId: r.appId, cellAction: cell.action } } }).then(showVoiceOutcome), "🎤 Ask Siri"));
}

function listItem(templateId, item, spinning) {
  const select = (extra) => hmiInput(templateId, { selectItem: Object.assign({ itemId: item.id }, extra || {}) });
  const spin = spinning ? h("span", { class: "spinner", "data-spinner": item.id }) : null;
  if (item.imageRow) {
    const row = item.imageRow;
    return h("div", { class: "item", "data-item-id": item.id },
      h("div", { class: "texts" }, tap("div", { class: "text" }, () => select(), row.text || ""),
        h("div", { class: "imagerow" }, (row.images || []).map((img, i) =>
          tap("span", { class: "img-cell", "data-image-index": i }, () => select({ imageSelected: true, imageIndex: i }),
            image(img, 44), (row.imageTitles || [])[i] || "")))), spin);
  }
  if (item.message) {
    const m = item.message;
    const lead = m.leadingIndicator === "MESSAGE_LEADING_INDICATOR_UNREAD" ? h("span", { class: "unread" })
      : m.leadingIndicator === "MESSAGE_LEADING_INDICATOR_PIN" ? "📌" : m.leadingIndicator === "MESSAGE_LEADING_INDICATOR_STAR" ? "★" : null;
    return tap("div", { class: "item", "data-item-id": item.id }, () => select(), lead, m.leadingImage ? image(m.leadingImage, 36) : null,
      h("div", { class: "texts" }, h("div", { class: "text" }, m.text || ""), h("div", { class: "detail" }, m.detailText || "")),
      m.trailingKind === "MESSAGE_TRAILING_KIND_TEXT" ? h("span", { class: "accessory" }, m.trailingText || "")
        : m.trailingKind === "MESSAGE_TRAILING_KIND_MUTE" ? "🔇" : m.trailingKind === "MESSAGE_TRAILING_KIND_IMAGE" ? image(m.trailingImage, 24) : null,
      spin);
  }
  const g = item.general || {};
  const playing = g.playing ? h("span", { class: "accessory" }, "♪") : null;
  const leading = g.playingIndicatorLocation !== "PLAYING_INDICATOR_LOCATION_TRAILING";
  return tap("div", { class: "item" + (g.disabled ? " disabled" : ""), disabled: g.disabled, "data-item-id": item.id }, () => select(),
    g.showReadStatus && !g.read ? h("span", { class: "unread" }) : null,
    leading ? playing : null,
    g.image ? image(g.image, 40) : null,
    h("div", { class: "texts" },
      h("div", { class: "text" }, g.text || "", g.explicitContent ? " 🅴" : ""),
      g.detailText ? h("div", { class: "detail" }, g.detailText) : null,
      g.showsProgress ? h("div", { class: "progress" }, h("div", { style: `width:${Math.round((g.progress || 0) * 100)}%` })) : null),
    leading ? null : playing,
    spin,
    g.accessory === "ACCESSORY_TYPE_DISCLOSURE_INDICATOR" ? h("span", { class: "accessory" }, "›")
      : g.accessory === "ACCESSORY_TYPE_CLOUD" ? h("span", { class: "accessory" }, "☁") : g.accessoryImage ? image(g.accessoryImage, 20) : null);
}

// Remote commands (PROTOCOL.md section 23): a touch names the app on screen;
// the answer is the app's status, shown under the controls.
function remoteCommand(appId, command, extra) {
  const call = Object.assign({ command: "REMOTE_COMMAND_" + command }, extra || {});
  return hmi({ sendRemoteCommand: { appId, call } }).then(showRemoteOutcome);
}
// Media keys and the steering wheel: the car routes them to the main audio's owner.
function carButton(button) {
  return hmi({ carButton: { button: "CAR_BUTTON_" + button } }).then(showRemoteOutcome);
}
function showRemoteOutcome(answer) {
  const o = answer.result && answer.result.remoteCommand;
  S.remoteOutcome = o ? `${(o.call.command || "").replace("REMOTE_COMMAND_", "").toLowerCase()}: ${(o.status || "").replace("REMOTE_COMMAND_STATUS_", "").toLowerCase()}`
    : (answer.code || answer.error || "");
  const el = $("np-status"); if (el) el.textContent = S.remoteOutcome;
  return answer;
}

// The transport controls the app declared: enabled ones work, disabled ones are greyed, unsupported ones absent.
function transportControls(t) {
  const remote = S.remote || { commands: [] };
  const cmds = {};
  for (const c of remote.commands) cmds[(c.command || "").replace("REMOTE_COMMAND_", "")] = c;
  if (!remote.commands.length) return null;
  const playing = t.playbackRate > 0;
  const button = (name, label, extra) => {
    const c = cmds[name];
    if (!c) return null;
    return tap("button", { class: "btn transport" + (c.active ? " selected" : ""), disabled: !c.enabled, "data-command": "REMOTE_COMMAND_" + name, title: c.title || name },
      () => remoteCommand(remote.appId, name, extra), label);
  };
  const skip = (name, arrow) => {
    const c = cmds[name];
    return button(name, `${arrow}${(c && c.preferredIntervals && c.preferredIntervals[0]) || ""}`);
  };
  const playPause = cmds.TOGGLE_PLAY_PAUSE ? button("TOGGLE_PLAY_PAUSE", playing ? "❚❚" : "▶")
    : playing ? button("PAUSE", "❚❚") || button("STOP", "■") : button("PLAY", "▶");
  return h("div", { class: "np-transport", id: "np-transport" },
    button("PREVIOUS_TRACK", "◀◀"), skip("SKIP_BACKWARD", "↺"), playPause, skip("SKIP_FORWARD", "↻"), button("NEXT_TRACK", "▶▶"),
    button("LIKE", "♥", { negative: !!(cmds.LIKE && cmds.LIKE.active) }), button("DISLIKE", "✕"), button("BOOKMARK", "★"),
    h("span", { class: "muted", id: "np-status" }, S.remoteOutcome || ""));
}

function renderNowPlaying(templateId, t) {
  const names = { PLAYBACK_RATE: t.playbackRate > 0 ? "❚❚" : "▶", SHUFFLE: "⤮", REPEAT: "↻", ADD_TO_LIBRARY: "+", MORE: "…" };
  const pct = t.live ? 100 : (t.durationSeconds ? Math.min(100, 100 * (t.elapsedSeconds || 0) / t.durationSeconds) : 0);
  const press = (id) => hmiInput(templateId, { nowPlayingButton: { buttonId: id } });
  return h("div", { class: "nowplaying", id: "now-playing" },
    t.artwork ? image(t.artwork, 160, "artwork") : h("span", { class: "img no-artwork", style: "width:160px;height:160px" }, "♫"),
    h("div", { class: "np-meta" },
      h("div", { class: "np-title" }, t.title || "Not Playing"), h("div", { class: "np-artist" }, [t.artist, t.album].filter(Boolean).join(" — ")),
      h("div", { class: "progress" }, h("div", { style: `width:${pct}%` })),
      h("div", { class: "muted" }, t.live ? "LIVE" : `${fmtClock(t.elapsedSeconds)} / ${fmtClock(t.durationSeconds)}`, t.playbackRate > 0 ? "  ▶ playing" : "  ❚❚ paused"),
      transportControls(t),
      h("div", { class: "muted np-audio", id: "np-audio" }, audioFocusText()),
      h("div", { class: "np-buttons" },
        (t.buttons || []).map((b) => {
          const k = (b.kind || "").replace("NOW_PLAYING_BUTTON_KIND_", "");
          return tap("button", { class: "btn" + (b.selected ? " selected" : ""), disabled: b.disabled, "data-button-id": b.id },
            () => press(b.id), k === "IMAGE" ? image(b.image, 20, b.id) : names[k] || b.id);
        }),
        t.upNextEnabled ? tap("button", { class: "btn", "data-button-id": "up-next" }, () => press("up-next"), t.upNextTitle || "Up Next") : null,
        t.albumArtistButtonEnabled ? tap("button", { class: "btn", "data-button-id": "album-artist" }, () => press("album-artist"), "Album / Artist") : null)));
}

function renderPOI(templateId, t) {
  const points = t.points || [];
  const sel = t.selectedIndex === undefined ? 0 : t.selectedIndex;
  const lats = points.map((p) => (p.location || {}).latitude || 0), lons = points.map((p) => (p.location || {}).longitude || 0);
  const [minLa, maxLa, minLo, maxLo] = [Math.min(...lats), Math.max(...lats), Math.min(...lons), Math.max(...lons)];
  const pos = (p) => {
    const l = p.location || {};
    const x = maxLo > minLo ? 10 + 80 * ((l.longitude || 0) - minLo) / (maxLo - minLo) : 50;
    const y = maxLa > minLa ? 90 - 80 * ((l.latitude || 0) - minLa) / (maxLa - minLa) : 50;
    return `left:${x}%;top:${y}%`;
  };
  const selectPoi = (p) => hmiInput(templateId, { selectPoi: { poiId: p.id } });
  // The driver moves the map: the region shown (the pins' box, shifted a little) goes to the app.
  const moveMap = () => hmiInput(templateId, { poiRegion: { region: {
    centerLatitude: (minLa + maxLa) / 2 + 0.01, centerLongitude: (minLo + maxLo) / 2 + 0.01,
    spanLatitude: Math.max(0.02, (maxLa - minLa) * 1.5), spanLongitude: Math.max(0.02, (maxLo - minLo) * 1.5) } } });
  return h("div", { class: "poi-layout" },
    h("div", { class: "poi-map" }, h("div", { class: "map" }),
      tap("button", { class: "btn", id: "poi-move", style: "position:absolute;left:8px;bottom:8px;z-index:3" }, moveMap, "Move map"),
      points.map((p, i) => tap("button", { class: "pin" + (i === sel ? " selected" : ""), style: pos(p), "data-poi-id": p.id }, () => selectPoi(p), String(i + 1)))),
    h("div", { class: "poi-list" }, points.map((p, i) => {
      const selected = i === sel;
      return tap("div", { class: "poi-card" + (selected ? " selected" : ""), "data-item-id": p.id }, () => selectPoi(p),
        h("div", { class: "text" }, `${i + 1}. `, selected && p.detailTitle ? p.detailTitle : p.title || ""),
        h("div", { class: "detail" }, selected && p.detailSubtitle ? p.detailSubtitle : p.subtitle || ""),
        h("div", { class: "muted" }, selected && p.detailSummary ? p.detailSummary : p.summary || ""),
        selected ? h("div", { class: "actions" }, [p.primaryButton, p.secondaryButton].filter((b) => b && b.id).map((b) => textButton(b, templateId))) : null);
    })));
}

function renderMap(templateId, t, r) {
  const wrap = h("div", { style: "position:absolute;inset:0" }, h("div", { class: "map", id: "map" }));
  const meta = S.meta, appId = r.appId;
  const g = meta.guidance || {};
  const guiding = g.appId === appId && (g.state === "GUIDANCE_STATE_ACTIVE" || g.state === "GUIDANCE_STATE_PAUSED");
  wrap.append(h("div", { class: "navbar", style: "position:absolute;left:0;right:0;top:0;border:none;z-index:3" },
    (t.leadingButtons || []).map((b) => barButton(b, templateId)), h("div", { class: "title" }),
    (t.trailingButtons || []).map((b) => barButton(b, templateId))));
  wrap.append(h("div", { class: "map-buttons" }, (t.mapButtons || []).filter((b) => !b.hidden).map((b) =>
    tap("button", { class: "map-btn", disabled: b.disabled, "data-button-id": b.id },
      () => hmiInput(templateId, { pressButton: { buttonId: b.id } }), b.image && b.image.png ? image(b.image, 24, b.id) : b.id))));
  if (guiding) wrap.append(h("div", { class: "guidance-card", style: t.guidanceBackgroundColor ? "background:" + t.guidanceBackgroundColor : null }, guidanceBlock(meta, "main")));
  const pv = meta.previews || {};
  if (pv.previews && pv.appId === appId) wrap.append(renderPreviews(pv));
  if ((meta.cluster || {}).panning && (meta.cluster || {}).appId === appId || (meta.cluster || {}).panning) {
    const pan = (d) => navInput({ appId, pan: "PAN_DIRECTION_" + d });
    wrap.append(h("div", { class: "pan-pad", id: "pan-pad" },
      h("span"), tap("button", { class: "map-btn" }, () => pan("UP"), "▲"), h("span"),
      tap("button", { class: "map-btn" }, () => pan("LEFT"), "◀"), tap("button", { class: "map-btn" }, () => navInput({ appId, exitPanning: {} }), "✕"),
      tap("button", { class: "map-btn" }, () => pan("RIGHT"), "▶"),
      h("span"), tap("button", { class: "map-btn" }, () => pan("DOWN"), "▼"), h("span")));
  }
  return wrap;
}

function renderPreviews(pv) {
  const p = pv.previews, texts = p.texts || {};
  const card = h("div", { class: "previews-card", id: "previews" });
  for (const trip of p.trips || []) {
    card.append(h("div", { class: "text" }, (trip.destination && trip.destination.name) || trip.id));
    for (const rc of trip.routeChoices || []) {
      const selected = pv.previewedTripId === trip.id && (pv.previewedRouteChoiceId || "") === (rc.id || "");
      card.append(tap("div", { class: "route" + (selected ? " selected" : ""), "data-route-id": rc.id },
        () => navInput({ appId: pv.appId, previewTrip: { tripId: trip.id, routeChoiceId: rc.id } }),
        h("div", {}, first(rc.summaryVariants) || rc.id), h("div", { class: "muted" }, first(rc.additionalInformationVariants), " ", fmtEst(rc.estimates))));
    }
    card.append(tap("button", { class: "btn confirm", "data-trip-id": trip.id },
      () => navInput({ appId: pv.appId, startTrip: { tripId: trip.id, routeChoiceId: pv.previewedTripId === trip.id ? pv.previewedRouteChoiceId || "" : "" } }),
      texts.startButtonTitle || "Go"));
  }
  return card;
}

function renderNavAlert(a) {
  return h("div", { class: "nav-alert", id: "nav-alert" }, image(a.image, 32),
    h("div", { class: "text" }, first(a.titleVariants)), h("div", { class: "muted" }, first(a.subtitleVariants)),
    h("div", { class: "actions", style: "display:flex;gap:8px;justify-content:center;margin-top:8px" },
      (a.actions || []).map((b) => tap("button", { class: "btn", "data-button-id": b.id }, () => navInput({ alertAction: b.id }), b.title)),
      tap("button", { class: "btn cancel" }, () => navInput({ dismissAlert: {} }), "✕")));
}

function renderSearch(templateId, t, r) {
  const limited = S.vehicle.driving && S.vehicle.limitKeyboard !== false;
  const send = (text) => { S.searchText = text; hmiInput(templateId, { searchText: { text } }); };
  const input = h("input", { id: "search-input", placeholder: t.placeholder || "Search", value: S.searchText, disabled: limited, "data-focus": limited ? null : "1" });
  input.addEventListener("keydown", (e) => { e.stopPropagation(); if (e.key === "Enter") hmiInput(templateId, { searchButton: {} }); });
  input.addEventListener("input", () => send(input.value));
  const keys = "QWERTYUIOPASDFGHJKL⌫ZXCVBNM␣".split("");
  return h("div", { class: "search" }, input,
    limited ? h("div", { class: "note" }, "Keyboard unavailable while driving") : null,
    h("div", { class: "keyboard", id: "keyboard" }, keys.map((k) => tap("button", { class: "btn", disabled: limited },
      () => send(k === "⌫" ? S.searchText.slice(0, -1) : S.searchText + (k === "␣" ? " " : k.toLowerCase())), k)),
      tap("button", { class: "btn confirm", disabled: limited, style: "grid-column: span 2" }, () => hmiInput(templateId, { searchButton: {} }), "Search")),
    h("div", { class: "list" }, (r.searchResults || []).map((item) =>
      tap("div", { class: "item", "data-item-id": item.id }, () => hmiInput(templateId, { selectSearchResult: { itemId: item.id } }),
        h("div", { class: "texts" }, h("div", { class: "text" }, (item.general || item.message || {}).text || item.id),
          h("div", { class: "detail" }, (item.general || item.message || {}).detailText || ""))))));
}

function renderModal(tpl) {
  return h("div", { class: "modal-back", id: "modal" }, renderModalBody(tpl));
}
function renderModalBody(tpl) {
  const k = kindOf(tpl), t = tpl[k] || {};
  window.simRendered[k] = (window.simRendered[k] || 0) + 1;
  const box = h("div", { class: "modal", "data-template-id": tpl.id, "data-kind": k });
  if (k === "alert") box.append(h("h3", {}, first(t.titleVariants)), h("div", { class: "actions" }, (t.actions || []).map((a) => textButton(a, tpl.id))));
  else if (k === "actionSheet") box.append(h("h3", {}, t.title || ""), h("div", {}, t.message || ""), h("div", { class: "actions" }, (t.actions || []).map((a) => textButton(a, tpl.id))));
  else if (k === "voiceControl") {
    const st = (t.states || []).find((s) => s.id === t.activeStateId) || (t.states || [])[0] || {};
    box.append(h("div", { class: "spinner", style: "margin:0 auto 10px;width:40px;height:40px" }), image(st.image, 48), h("h3", {}, first(st.titleVariants)),
      h("div", { class: "muted" }, "Voice control (" + (st.id || "") + ")"));
  } else box.append(renderTemplate(tpl, {}));
  return box;
}

// ---------------------------------------------------------------- dashboard and cluster

// `where`: "main" (the 800-point screen: the longest instruction), "dashboard"
// (its own short variants first) or "cluster".
function guidanceBlock(meta, where) {
  const cluster = where === "cluster";
  const g = meta.guidance || {};
  const state = (g.state || "GUIDANCE_STATE_IDLE").replace("GUIDANCE_STATE_", "").toLowerCase();
  const out = [];
  if (state === "paused") out.push(h("div", { class: "instr" }, "Paused: " + (g.pauseReason || "").replace("PAUSE_REASON_", "").toLowerCase().replace(/_/g, " "), g.pauseDescription ? " — " + g.pauseDescription : ""));
  const maneuvers = (meta.maneuvers || {}).maneuvers || [];
  maneuvers.forEach((m, i) => {
    const laneOnly = m.displayStyle === "MANEUVER_DISPLAY_STYLE_SYMBOL_ONLY" && !(m.instructionVariants || []).length;
    const text = where === "dashboard" ? first(m.dashboardInstructionVariants) || first(m.instructionVariants) : first(m.instructionVariants);
    out.push(h("div", { class: "maneuver", "data-maneuver-id": m.id, style: i ? "opacity:.75;font-size:90%" : "" },
      m.symbol && m.symbol.png ? image(m.symbol, 44) : h("span", { class: "sym", title: (m.symbol || {}).asset || "" }, laneOnly ? "⇈" : maneuverGlyph(m)),
      h("div", {}, laneOnly ? h("div", { class: "lanes" }, image(m.symbol, 120, "lanes"), " lane guidance")
        : h("div", { class: "instr" }, (i ? "Then: " : "") + text),
        m.estimates ? h("div", { class: "estimates" }, fmtEst(m.estimates)) : null,
        m.junctionImage ? h("div", { class: "muted" }, "[junction view]") : null)));
  });
  const lanes = laneRow(meta, where);
  if (lanes) out.push(lanes);
  const road = first((meta.maneuvers || {}).currentRoadNameVariants);
  if (road) out.push(h("div", { class: "muted", "data-road-name": road }, "On " + road));
  const te = meta.tripEstimates || {};
  if (te.present) out.push(h("div", { class: "estimates", id: cluster ? "cluster-eta" : null }, "Trip: " + fmtEst(te.estimates)));
  if (g.trip && g.trip.destination && g.trip.destination.name) out.push(h("div", { class: "muted" }, "to " + g.trip.destination.name));
  return out;
}

// A lane direction's arrow: degrees, 0 straight ahead, clockwise (PROTOCOL.md 19.2).
function laneGlyph(deg) {
  const a = Math.abs(deg), right = deg > 0;
  if (a <= 22.5) return "↑";
  if (a <= 67.5) return right ? "↗" : "↖";
  if (a <= 135) return right ? "↱" : "↰";
  return right ? "↷" : "↶";
}

// The lanes from the data (PROTOCOL.md 19.5): the current lane guidance, else
// the one the next maneuver links. A box per lane, left to right, its arrows
// drawn over each other (one per direction); the highlighted direction of a
// good or preferred lane is lit and a preferred lane is shaded.
function laneRow(meta, where) {
  const section = meta.maneuvers || {};
  const all = section.laneGuidances || [];
  if (!all.length) return null;
  const id = section.currentLaneGuidanceId || ((section.maneuvers || [])[0] || {}).linkedLaneGuidanceId;
  const guidance = all.find((g) => g.id === id) || all[0];
  const arrow = (deg, lit) => h("span", { class: "lane-arrow" + (lit ? " lit" : ""), "data-angle": deg || 0 }, laneGlyph(deg || 0));
  const lanes = (guidance.lanes || []).map((lane) => {
    const status = (lane.status || "LANE_STATUS_NOT_GOOD").replace("LANE_STATUS_", "").toLowerCase().replace("_", "-");
    const highlighted = lane.highlightedAngleDeg !== undefined;
    return h("span", { class: "lane " + status, "data-lane-status": status },
      ...(lane.anglesDeg || []).map((deg) => arrow(deg, false)),
      highlighted ? arrow(lane.highlightedAngleDeg, status !== "not-good") : null);
  });
  // The cluster is narrow: the lanes alone; the main screen and dashboard say it too.
  const text = where === "cluster" ? null : h("span", { class: "lane-text" }, first(guidance.instructionVariants));
  return h("div", { class: "lane-row", "data-lane-guidance-id": guidance.id, title: first(guidance.instructionVariants) }, ...lanes, text);
}

function nowPlayingTile(meta) {
  const np = meta.nowPlaying || {};
  if (!np.appId) return h("div", { class: "tile muted" }, "Nothing playing");
  return h("div", { class: "tile", "data-now-playing": np.appId }, "♫ ", h("b", {}, np.title || ""), " ", [np.artist, np.album].filter(Boolean).join(" — "),
    h("div", { class: "muted" }, np.live ? "live" : `${fmtClock(np.elapsedSeconds)} / ${fmtClock(np.durationSeconds)}`, np.playbackRate > 0 ? " ▶" : " ❚❚"));
}

function guidanceState(meta) {
  const g = meta.guidance || {};
  let s = (g.state || "GUIDANCE_STATE_IDLE").replace("GUIDANCE_STATE_", "");
  if (g.state === "GUIDANCE_STATE_ENDED" && g.endReason) s += " (" + g.endReason.replace("NAVIGATION_END_REASON_", "").toLowerCase().replace(/_/g, " ") + ")";
  if (g.nativeNavigationActive) s += " · car navigation active";
  return h("div", { class: "muted", "data-guidance": g.state || "GUIDANCE_STATE_IDLE" }, "Guidance: " + s + (g.appId ? " · " + appName(g.appId) : ""));
}

// The dashboard's and cluster's video fills the card's width at the window's aspect, under the tiles.
function smallVideo(el, screen) {
  const layer = videoLayer(screen), w = (V.streams[screen] || {}).window || {};
  el.classList.toggle("has-video", !!layer);
  el.style.minHeight = layer && w.widthPt ? Math.round(el.clientWidth * w.heightPt / w.widthPt + (el.offsetHeight - el.clientHeight)) + "px" : "";
  if (layer) el.append(...layer);
}

function renderDashboard() {
  const el = $("dashboard");
  el.replaceChildren();
  smallVideo(el, "SCREEN_DASHBOARD");
  if (!S.daemon || !S.daemon.connected) { el.append(h("div", { class: "muted" }, "not connected")); return; }
  const meta = S.meta, r = S.screens.SCREEN_DASHBOARD || {};
  const g = meta.guidance || {};
  const guiding = g.state === "GUIDANCE_STATE_ACTIVE" || g.state === "GUIDANCE_STATE_PAUSED";
  el.append(h("div", { class: "muted" }, r.appId ? "Dashboard: " + appName(r.appId) : "Dashboard"));
  if (guiding) el.append(h("div", { class: "tile" }, guidanceBlock(meta, "dashboard")));
  else {
    const buttons = (meta.cluster || {}).dashboardButtons || [];
    const navApp = (S.home && (S.home.icons || []).find((i) => i.category === "CATEGORY_NAVIGATION")) || null;
    if (buttons.length) {
      el.append(h("div", { class: "tile" }, buttons.map((b) => tap("button", { class: "btn", "data-dashboard-button": b.id, style: "display:block;width:100%;margin:4px 0;text-align:left" },
        () => navInput({ appId: (meta.cluster || {}).appId || "", dashboardButton: b.id }), h("b", {}, first(b.titleVariants)), " ", h("span", { class: "muted" }, first(b.subtitleVariants))))));
    } else if (navApp && !r.appId) {
      el.append(h("div", { class: "tile" }, tap("button", { class: "btn", id: "dashboard-launch" }, () => launch(navApp.appId, "SCENE_KIND_DASHBOARD"), "Show " + navApp.displayName + " on the dashboard")));
    } else el.append(h("div", { class: "tile muted" }, "No navigation"));
  }
  el.append(guidanceState(meta));
  el.append(nowPlayingTile(meta));
}

function renderCluster() {
  const el = $("cluster");
  el.replaceChildren();
  smallVideo(el, "SCREEN_INSTRUMENT_CLUSTER");
  if (!S.daemon || !S.daemon.connected) { el.append(h("div", { class: "muted" }, "not connected")); return; }
  const meta = S.meta, c = meta.cluster || {}, g = meta.guidance || {};
  const guiding = g.state === "GUIDANCE_STATE_ACTIVE" || g.state === "GUIDANCE_STATE_PAUSED";
  el.append(h("div", { class: "muted" }, c.appId ? "Cluster: " + appName(c.appId) : "Cluster"));
  if (guiding) el.append(h("div", { class: "tile", id: "cluster-guidance" }, guidanceBlock(meta, "cluster")));
  else el.append(h("div", { class: "tile" }, first(c.inactiveDescriptionVariants) || "No route guidance"));
  if (meta.alert && meta.alert.alert) el.append(h("div", { class: "tile" }, "⚠ ", first(meta.alert.alert.titleVariants)));
  el.append(guidanceState(meta));
  el.append(nowPlayingTile(meta));
  const ci = (kind) => request("cluster", { clusterInput: kind });
  const navApp = (S.home && (S.home.icons || []).find((i) => i.category === "CATEGORY_NAVIGATION")) || null;
  el.append(h("div", { class: "cluster-inputs" },
    h("button", { class: "btn", onclick: () => ci({ zoomIn: true }) }, "Zoom +"),
    h("button", { class: "btn", onclick: () => ci({ zoomOut: true }) }, "Zoom −"),
    h("button", { class: "btn", onclick: () => ci({ compass: "CLUSTER_SETTING_ENABLED" }) }, "Compass"),
    h("button", { class: "btn", onclick: () => ci({ speedLimit: "CLUSTER_SETTING_ENABLED" }) }, "Speed limit"),
    !c.appId && navApp ? h("button", { class: "btn", id: "cluster-launch", onclick: () => launch(navApp.appId, "SCENE_KIND_INSTRUMENT_CLUSTER") }, "Show " + navApp.displayName) : null));
}

// ---------------------------------------------------------------- base-view video (PROTOCOL.md section 25)

// The app's map for each screen, decoded and drawn off this thread: a Worker
// (video-worker.js) opens its own socket for the frames, decodes them with
// WebCodecs and draws the newest into each screen's canvas, transferred to it
// as an OffscreenCanvas. The page only places the canvases under the car's
// overlays and shows the Worker's counters (window.simVideo, for the browser
// test and the debug line).
const VIDEO_SCREENS = ["SCREEN_MAIN", "SCREEN_DASHBOARD", "SCREEN_INSTRUMENT_CLUSTER"];
const V = { streams: {}, panes: {}, worker: null, asked: 0, answers: {} };
window.simVideo = window.simVideo || {};

function videoWorker() {
  if (V.worker) return V.worker;
  V.worker = new Worker("/video-worker.js" + location.search);  // ?renderer=2d: see video-worker.js
  V.worker.onmessage = (e) => {
    const m = e.data;
    if (m.type === "stats" && V.panes[m.screen]) { Object.assign(window.simVideo[m.screen], m.stats); videoStatsText(V.panes[m.screen]); }
    else if (m.type === "drawTimes" && V.answers[m.id]) { V.answers[m.id]({ times: m.times, drawn: m.drawn, received: m.received, decoded: m.decoded }); delete V.answers[m.id]; }
  };
  return V.worker;
}

function videoPane(screen) {
  if (V.panes[screen]) return V.panes[screen];
  const short = screen.replace("SCREEN_", "").toLowerCase();
  const canvas = h("canvas", { class: "video", id: "video-" + short, width: 2, height: 2 });
  const p = V.panes[screen] = { screen, canvas, stats: h("div", { class: "video-stats", id: "video-stats-" + short }) };
  window.simVideo[screen] = { received: 0, decoded: 0, drawn: 0, dropped: 0, errors: 0, keyframesAsked: 0, fps: 0, latencyMs: null, latencySource: "", codec: "", width: 0, height: 0 };
  if (!("transferControlToOffscreen" in canvas) || !("VideoDecoder" in window)) { p.stats.textContent = "no OffscreenCanvas or WebCodecs in this browser"; return p; }
  const offscreen = canvas.transferControlToOffscreen();
  videoWorker().postMessage({ type: "canvas", screen, canvas: offscreen }, [offscreen]);
  return p;
}
for (const screen of VIDEO_SCREENS) videoPane(screen);

function onVideoStreams(m) {
  V.streams = {};
  for (const s of (m.streams && m.streams.streams) || []) V.streams[s.screen] = s;
  // Each shown window's width in the page's device pixels: the Worker draws a larger frame at that size.
  const shown = {};
  for (const [screen, s] of Object.entries(V.streams)) shown[screen] = ((s.window || {}).widthPt || 0) * (window.devicePixelRatio || 1);
  if (V.worker) V.worker.postMessage({ type: "streams", shown });
}

// The decoder starts again from a keyframe it asks for (the browser test's decoder loss).
function resetDecoder(p) {
  if (V.worker) V.worker.postMessage({ type: "reset", screen: p.screen });
}

// For measuring (scripts/video-glass.py, the browser test): the app's draw time of each frame
// received, by frame_number & 0xffff, and when the Worker last drew, in Unix ms.
window.simVideo.drawTimes = (screen) => new Promise((resolve) => {
  const id = ++V.asked;
  V.answers[id] = resolve;
  videoWorker().postMessage({ type: "drawTimes", id, screen });
});

function videoStatsText(p) {
  const st = window.simVideo[p.screen];
  // No picture yet (an app that streams no video): no numbers over the car's screen (.video-stats:empty hides it).
  if (!st.decoded) { p.stats.textContent = ""; return; }
  p.stats.textContent = `${st.fps.toFixed(1)} fps · ${st.latencyMs === null ? "?" : Math.round(st.latencyMs) + " ms"} · ${st.width}×${st.height}`;
  p.stats.title = `latency p50 from the ${st.latencySource} to the picture drawn (${st.toSimMs === null ? "?" : Math.round(st.toSimMs)} ms of it before the page, ${Math.round(st.decoderMs || 0)} ms in the decoder); p99 ${Math.round(st.latencyP99Ms || 0)} ms; ${st.dropped} dropped, ${st.superseded || 0} decoded but not drawn (a newer one came first), ${st.keyframesAsked} keyframes asked, ${st.errors} decoder errors; ${st.codec}`;
}

// The canvas of a screen under its overlays, at the window's size in points,
// or nothing when the screen shows no stream.
function videoLayer(screen) {
  const stream = V.streams[screen];
  if (!stream) return null;
  const p = videoPane(screen), w = stream.window || {};
  p.canvas.style.setProperty("--window-w", (w.widthPt || 0) + "px");
  p.canvas.style.setProperty("--window-h", (w.heightPt || 0) + "px");
  p.canvas.style.aspectRatio = `${w.widthPt || 16} / ${w.heightPt || 9}`;
  p.canvas.dataset.appId = stream.appId || "";
  // The safe area the car told the app: the app keeps its content inside it.
  const sa = w.safeArea || {};
  p.stats.dataset.safeArea = `${sa.top || 0} ${sa.right || 0} ${sa.bottom || 0} ${sa.left || 0}`;
  return [p.canvas, p.stats];
}

// ---------------------------------------------------------------- car controls

function syncControls() {
  $("ctl-night").checked = S.vehicle.contentStyle !== "CONTENT_STYLE_LIGHT";
  $("ctl-driving").checked = !!S.vehicle.driving;
  $("ctl-native-nav").checked = !!S.vehicle.nativeNavigationActive;
  $("ctl-rhd").checked = S.rhd;
}

// SetVehicleState carries the whole state: send ours with the one change.
function setVehicle(change) {
  const v = Object.assign({}, S.vehicle, change);
  const state = { driving: !!v.driving, contentStyle: v.contentStyle || "CONTENT_STYLE_DARK", nativeNavigationActive: !!v.nativeNavigationActive };
  if (v.driving) { state.limitKeyboard = true; state.limitLists = true; }
  if (v.carAudioSource) state.carAudioSource = v.carAudioSource;
  hmi({ setVehicleState: { state } }).then((a) => {
    $("ctl-result").textContent = "SetVehicleState: " + (a.code || a.error);
    if (a.code === "OK") { S.vehicle = Object.assign(S.vehicle, state); if (!v.driving) { S.vehicle.limitKeyboard = false; S.vehicle.limitLists = false; } }
    syncControls(); render();
  });
}

function setDisplay(size) {
  const [w, hh] = size.split("x").map(Number);
  const scale = Math.min(1, 900 / w);
  const el = $("main-screen");
  el.style.setProperty("--w", w + "px"); el.style.setProperty("--h", hh + "px");
  $("main-frame").style.zoom = scale;
  $("display-size").textContent = `${w}×${hh} pt` + (scale < 1 ? ` (shown at ${Math.round(scale * 100)}%)` : "");
}

// ---------------------------------------------------------------- knob / touchpad focus

function focusList() { return Array.from($("main-screen").querySelectorAll("[data-focus]")).filter((e) => e.offsetParent !== null); }
function moveFocus(delta) {
  const list = focusList(); if (!list.length) return;
  // Under a modal only the modal's buttons take input.
  const modal = $("main-screen").querySelector(".modal-back");
  const scope = modal ? list.filter((e) => modal.contains(e)) : list;
  const i = scope.indexOf(document.activeElement);
  const next = scope[(i < 0 ? 0 : i + delta + scope.length) % scope.length];
  next.focus(); next.scrollIntoView({ block: "nearest" });
}
// The keyboard's media keys are the steering wheel's buttons, wherever the focus is.
const MEDIA_KEYS = { MediaPlayPause: "PLAY_PAUSE", MediaPlay: "PLAY", MediaPause: "PAUSE", MediaStop: "STOP",
  MediaTrackNext: "NEXT", MediaTrackPrevious: "PREVIOUS" };
document.addEventListener("keydown", (e) => {
  if (MEDIA_KEYS[e.key]) { carButton(MEDIA_KEYS[e.key]); e.preventDefault(); return; }
  if (e.target.tagName === "INPUT" && e.target.type !== "checkbox" || e.target.tagName === "SELECT") return;
  const inMain = $("main-screen").contains(document.activeElement);
  if (!inMain && !["ArrowDown", "ArrowUp"].includes(e.key)) return;
  if (!inMain && document.activeElement !== document.body) return;
  const flip = S.rhd ? -1 : 1;
  switch (e.key) {
    case "ArrowDown": moveFocus(1); break;
    case "ArrowUp": moveFocus(-1); break;
    case "ArrowRight": moveFocus(flip); break;
    case "ArrowLeft": moveFocus(-flip); break;
    case "Enter": case " ": if (document.activeElement && document.activeElement.dataset.focus) document.activeElement.click(); break;
    case "Escape": case "Backspace": goBack(); break;
    case "h": case "H": goHome(); break;
    case "v": case "V": voiceButton(); break;
    default: return;
  }
  e.preventDefault();
});

// ---------------------------------------------------------------- log

function addLog(m) {
  if (m.peer === "cluster" && m.name === "metadataUpdate" && !$("log-metadata").checked) return;
  const log = $("log");
  const stick = log.scrollTop + log.clientHeight >= log.scrollHeight - 20;
  const time = new Date().toLocaleTimeString();
  const env = m.envelope ? Object.assign({}, m.envelope) : null;
  const body = env ? env[m.name] : null;
  const code = m.name === "result" && body ? " " + (body.code || "ERROR_CODE_OK") : "";
  const summary = h("summary", { class: "dir-" + m.dir }, `${time} ${m.dir === "out" ? "→" : "←"} ${m.peer} ${m.name}${code}`,
    h("span", { class: "muted" }, " " + (body ? JSON.stringify(body).slice(0, 140) : "")));
  log.append(h("details", { class: code && code !== " ERROR_CODE_OK" ? "log-error" : "" }, summary, body ? h("pre", {}, JSON.stringify(body, null, 2)) : null));
  while (log.childNodes.length > 600) log.firstChild.remove();
  if (stick) log.scrollTop = log.scrollHeight;
}

let toastTimer = null;
function toast(text) {
  const t = $("toast"); t.textContent = text; t.hidden = false;
  clearTimeout(toastTimer); toastTimer = setTimeout(() => { t.hidden = true; }, 3500);
}

// ---------------------------------------------------------------- the car's output

// The bridge relays the car's mixed output (PROTOCOL.md section 24.7) as
// binary messages: byte 0 = 2, bytes 4-11 when it plays (car clock, us), then
// 20 ms of PCM s16le stereo at 48 kHz. Each chunk is an AudioBufferSourceNode
// scheduled ~100 ms ahead of the context's clock, through an AnalyserNode
// (window.simAudio.level() reads it). Chrome starts an AudioContext only after
// a user gesture: it is made at load and resumed on the first click or key.
const A = { ctx: null, gain: null, analyser: null, next: 0 };
// focusLog: each focus line shown, in order (the tests read it); promptPeak: the loudest level heard during a prompt.
window.simAudio = { chunks: 0, played: 0, dropped: 0, state: "off", level: () => audioLevel(), focusLog: [], promptPeak: 0 };

function startAudio() {
  const Ctx = window.AudioContext || window.webkitAudioContext;
  if (!Ctx) return;
  if (!A.ctx) {
    A.ctx = new Ctx({ latencyHint: "interactive" });
    A.gain = A.ctx.createGain();
    A.analyser = A.ctx.createAnalyser();
    A.analyser.fftSize = 2048;
    A.gain.connect(A.analyser);
    A.analyser.connect(A.ctx.destination);
    A.ctx.onstatechange = () => renderAudio();
  }
  if (A.ctx.state === "suspended") A.ctx.resume().catch(() => {});
  renderAudio();
}

function onAudioChunk(buffer) {
  const st = window.simAudio;
  st.chunks++;
  if (!A.ctx || A.ctx.state !== "running") { st.dropped++; return; }
  const pcm = new Int16Array(buffer, 12, (buffer.byteLength - 12) >> 1);
  const frames = pcm.length >> 1;
  const chunk = A.ctx.createBuffer(2, frames, 48000);
  const left = chunk.getChannelData(0), right = chunk.getChannelData(1);
  for (let i = 0; i < frames; i++) { left[i] = pcm[2 * i] / 32768; right[i] = pcm[2 * i + 1] / 32768; }
  const now = A.ctx.currentTime;
  // Starting, or after a gap: 100 ms ahead. Over 400 ms ahead: behind, drop (latest wins).
  if (A.next < now + 0.01) A.next = now + 0.1;
  if (A.next > now + 0.4) { st.dropped++; return; }
  const source = A.ctx.createBufferSource();
  source.buffer = chunk;
  source.connect(A.gain);
  source.start(A.next);
  A.next += chunk.duration;
  st.played++;
}

// The RMS of what the analyser holds now (the last ~43 ms played).
function audioLevel() {
  if (!A.analyser) return 0;
  const data = new Float32Array(A.analyser.fftSize);
  A.analyser.getFloatTimeDomainData(data);
  let sum = 0;
  for (const x of data) sum += x * x;
  return Math.sqrt(sum / data.length);
}

// The audio focus from the metadata stream (PROTOCOL.md 19.8): who owns the main audio, ducked, paused.
function audioFocusText() {
  const a = S.meta.audio || {};
  const owner = (a.mainOwner || "").replace("AUDIO_OWNER_", "").toLowerCase();
  const main = owner === "phone" ? `${appName(a.appId)} (${a.appId})` : owner === "car" ? `car: ${a.carSource || "radio"}` : "none";
  const parts = ["main audio: " + main + (a.mainSpoken ? ", spoken" : "")];
  if (a.promptAppId) parts.push("prompt: " + appName(a.promptAppId));
  if (a.mainDucked) parts.push("ducked −12 dB");
  if (a.mainPaused) parts.push("paused under the prompt");
  if (a.callActive) parts.push("call");
  if (a.voiceSessionActive) parts.push("voice session" + (a.voiceAppId ? ": " + appName(a.voiceAppId) : ""));
  // The car's own record of its microphone (24.6): shown whatever the app does.
  if (a.microphoneAppId) parts.push("MICROPHONE ON: " + appName(a.microphoneAppId) + (a.microphonePurpose === "MICROPHONE_PURPOSE_CALL" ? " (call)" : " (voice control)"));
  return parts.join(" · ");
}

function renderAudio() {
  const st = window.simAudio;
  st.state = A.ctx ? A.ctx.state : "off";
  const focus = $("audio-focus");
  if (focus) {
    const text = audioFocusText();
    if (st.focusLog[st.focusLog.length - 1] !== text) { st.focusLog.push(text); if (st.focusLog.length > 50) st.focusLog.shift(); }
    focus.textContent = text;
    const a = S.meta.audio || {};
    focus.dataset.owner = a.mainOwner === "AUDIO_OWNER_PHONE" ? a.appId || "" : a.mainOwner === "AUDIO_OWNER_CAR" ? "car" : "";
    focus.classList.toggle("ducked", !!a.mainDucked);
    focus.classList.toggle("paused", !!a.mainPaused);
  }
  const button = $("audio-start");
  if (button) {
    button.textContent = st.state === "running" ? "🔊 car audio on" : "🔇 click to hear the car";
    button.classList.toggle("on", st.state === "running");
  }
}

// A level meter beside the focus line, 20 times a second.
function drawAudioMeter() {
  const level = audioLevel();
  const bar = $("audio-meter-bar");
  if (bar) bar.style.width = Math.min(100, Math.round(level * 300)) + "%";
  if ((S.meta.audio || {}).promptAppId) window.simAudio.promptPeak = Math.max(window.simAudio.promptPeak, level);
}

// ---------------------------------------------------------------- wiring

$("ctl-night").addEventListener("change", (e) => setVehicle({ contentStyle: e.target.checked ? "CONTENT_STYLE_DARK" : "CONTENT_STYLE_LIGHT" }));
$("ctl-driving").addEventListener("change", (e) => setVehicle({ driving: e.target.checked }));
$("ctl-native-nav").addEventListener("change", (e) => setVehicle({ nativeNavigationActive: e.target.checked }));
$("ctl-rhd").addEventListener("change", (e) => { S.rhd = e.target.checked; S.rhdTouched = true; render(); });
$("ctl-display").addEventListener("change", (e) => setDisplay(e.target.value));
$("ctl-home").addEventListener("click", goHome);
$("ctl-nowplaying").addEventListener("click", openNowPlaying);
$("ctl-voice").addEventListener("click", voiceButton);
$("say-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("say-text").value.trim();
  if (text) say(text).then(() => { $("say-text").value = ""; });
});
$("log-clear").addEventListener("click", () => $("log").replaceChildren());
$("audio-start").addEventListener("click", startAudio);
// Chrome's autoplay rule: the context runs once the user interacted with the page.
document.addEventListener("pointerdown", startAudio, { capture: true, once: true });
document.addEventListener("keydown", startAudio, { capture: true, once: true });
startAudio();
setInterval(drawAudioMeter, 50);
setDisplay("800x480");
render();
connect();
