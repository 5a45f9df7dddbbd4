// headunitd simulator: base-view video off the page's main thread
// (PROTOCOL.md section 25). One Worker for the three panes: it opens its own
// WebSocket (/video) to the simulator, decodes each screen's H.264 with
// WebCodecs and draws into the OffscreenCanvas the page transferred for that
// screen, so a busy page (redrawing the screens, the log, audio) never holds a
// frame back. Latest frame wins at every step: the simulator keeps a stream's
// unsent frames as one run (a keyframe replaces it; past 30 frames it is
// dropped and a keyframe asked for), written whole once fewer than two are in
// flight (each acknowledged with "ack CHANNEL" when taken off the socket), a
// decoder more than 2 frames behind drops P-frames
// and starts again from a keyframe, and decoded frames are never queued: the
// newest is drawn, older ones still waiting are closed unseen.
//
// Drawn in software: the frame's I420 or NV12 planes copied out with
// VideoFrame.copyTo in their own format, converted to RGBA here (BT.601
// limited range, as the apps encode) at the resolution the page shows the
// window at (a 2x window on a 1x page: every other pixel), and put with
// putImageData. Not with drawImage(VideoFrame) (nor copyTo with an RGBA
// conversion): in Chromium those wait for the page's thread, so a busy page
// would hold every frame back (measured: nothing drawn while the page's
// thread was blocked for a second); nor with WebGL2, which SwiftShader runs
// with stalls of ~400 ms on a machine without a GPU. ?renderer=2d on the
// page's URL picks drawImage (full resolution, native conversion, tied to
// the page's thread) to compare.
//
// Page -> Worker: {type: "canvas", screen, canvas} (transferred), {type:
// "streams", screens} (the screens that show a stream now), {type: "reset",
// screen} (start the decoder again: it asks for a keyframe), {type:
// "drawTimes", id, screen} (answered {type: "drawTimes", id, times, drawn}:
// the app's draw time of each frame received, by frame_number & 0xffff, and
// when the last frames were drawn, all in Unix ms).
// Worker -> page: {type: "stats", screen, stats} a few times a second, the
// counters the page shows and publishes in window.simVideo.
"use strict";

const SCREENS = { 1: "SCREEN_MAIN", 2: "SCREEN_DASHBOARD", 3: "SCREEN_INSTRUMENT_CLUSTER" };
// P-frames waiting in a decoder past this are dropped (it starts again from a keyframe): ?decodeQueue=N to
// try others. Three windows at 30 fps on a loaded 2-core machine: 1, 2, 4 gave 210, 210, 310 ms p50 and
// 450, 630, 840 ms p99 glass-to-glass, 1 asking for the most keyframes (BENCHMARKS.md).
const MAX_DECODE_QUEUE = Number(new URLSearchParams(self.location.search).get("decodeQueue")) || 2;
const panes = {};
let ws = null, wsUp = false, reqId = 0;

function pane(screen) {
  if (panes[screen]) return panes[screen];
  return panes[screen] = {
    screen, canvas: null, ctx: null, decoder: null, codec: "", channel: 0, waitingKey: true, lastAsk: 0,
    pending: new Map(),      // frame_number -> {simAt, phoneToSimUs, arrived}: until decoded
    newest: null,            // the newest decoded VideoFrame not drawn yet, and its timing
    drawAt: new Map(),       // frame_number & 0xffff -> the app's draw time in Unix ms (glass-to-glass)
    drawnLog: [], receivedLog: [], decodedLog: [],  // Unix ms of the last 300 draws, frames received, frames decoded
    decodedAt: [], latencies: [], toSim: [], inDecoder: [], changed: true,
    st: { received: 0, decoded: 0, drawn: 0, superseded: 0, dropped: 0, errors: 0, keyframesAsked: 0, fps: 0,
          latencyMs: null, latencyP99Ms: null, latencySource: "", toSimMs: null, decoderMs: null, codec: "", width: 0, height: 0 },
  };
}

function connect() {
  ws = new WebSocket(self.location.origin.replace(/^http/, "ws") + "/video");
  ws.binaryType = "arraybuffer";
  ws.onopen = () => { wsUp = true; };
  ws.onmessage = (e) => { if (typeof e.data !== "string") onVideoFrame(e.data); };  // text: answers to our requests
  ws.onclose = () => {
    wsUp = false;
    for (const p of Object.values(panes)) resetDecoder(p);
    setTimeout(connect, 1000);
  };
}

// "avc1.PPCCLL" from the SPS in front of a keyframe (profile_idc, constraint
// flags, level_idc): exactly what the app encoded, known before the first decode.
function codecOf(bytes) {
  for (let i = 0; i + 7 < bytes.length; i++) {
    if (bytes[i] === 0 && bytes[i + 1] === 0 && bytes[i + 2] === 1 && (bytes[i + 3] & 0x1f) === 7) {
      const hex = (n) => n.toString(16).toUpperCase().padStart(2, "0");
      return "avc1." + hex(bytes[i + 4]) + hex(bytes[i + 5]) + hex(bytes[i + 6]);
    }
  }
  return null;
}

function resetDecoder(p) {
  if (p.decoder && p.decoder.state !== "closed") { try { p.decoder.close(); } catch (e) { /* closed meanwhile */ } }
  p.decoder = null; p.waitingKey = true; p.pending.clear();
  if (p.newest) { p.newest.frame.close(); p.newest = null; }
}

function askKeyframe(p) {
  const now = performance.now();
  if (!p.channel || now - p.lastAsk < 250 || !wsUp) return;
  p.lastAsk = now;
  p.st.keyframesAsked++; p.changed = true;
  // No answer is awaited: the keyframe itself is the answer. The simulator holds the channel's P-frames back meanwhile.
  ws.send(JSON.stringify({ id: ++reqId, to: "hmi", envelope: { requestKeyframe: { channel: p.channel, reason: "KEYFRAME_REASON_VIEWER_ASKED" } } }));
}

function ensureDecoder(p, channel, codec) {
  if (p.decoder && p.decoder.state === "configured" && p.channel === channel && (!codec || p.codec === codec)) return true;
  if (!codec) return false;  // a P-frame: nothing to configure with until a keyframe
  resetDecoder(p);
  p.channel = channel; p.codec = codec; p.st.codec = codec;
  p.decoder = new VideoDecoder({
    output: (frame) => decoded(p, frame),
    error: (e) => {
      p.st.errors++; p.st.lastError = String(e && e.message || e); p.changed = true;
      p.decoder = null; p.waitingKey = true;
      askKeyframe(p);
    },
  });
  // No description: the access units are Annex B with SPS and PPS in front of each IDR.
  p.decoder.configure({ codec, optimizeForLatency: true });
  return true;
}

function onVideoFrame(buffer) {
  const dv = new DataView(buffer);
  if (buffer.byteLength < 36 || dv.getUint8(0) !== 1) return;
  const channel = dv.getUint32(4);
  // Taken off the socket: the simulator may send this channel's next frame (it keeps at most 2 in flight, newest first).
  if (wsUp) ws.send("ack " + channel);
  const screen = SCREENS[dv.getUint8(1)];
  if (!screen) return;
  const key = (dv.getUint8(2) & 1) === 1, number = dv.getUint32(8);
  const p = pane(screen), st = p.st;
  st.received++; p.changed = true;
  log(p.receivedLog);
  const data = new Uint8Array(buffer, 32);
  if (p.channel !== channel) { resetDecoder(p); p.channel = channel; }
  if (!ensureDecoder(p, channel, key ? codecOf(data) : null) || (p.waitingKey && !key)) {
    // A P-frame before a keyframe (or after an error) cannot be decoded: wait for the keyframe asked for.
    st.dropped++; p.waitingKey = true; askKeyframe(p); return;
  }
  // A decoder falling behind: drop rather than queue, and start again from a keyframe.
  if (!key && p.decoder.decodeQueueSize > MAX_DECODE_QUEUE) { st.dropped++; p.waitingKey = true; askKeyframe(p); return; }
  p.waitingKey = false;
  const simAt = dv.getFloat64(20), phoneToSimUs = dv.getInt32(28);
  p.pending.set(number, { simAt, phoneToSimUs, arrived: performance.now() });
  if (p.pending.size > 30) p.pending.delete(p.pending.keys().next().value);
  if (phoneToSimUs >= 0) {
    p.drawAt.set(number & 0xffff, simAt - phoneToSimUs / 1000);
    if (p.drawAt.size > 2000) p.drawAt.delete(p.drawAt.keys().next().value);
  }
  try {
    p.decoder.decode(new EncodedVideoChunk({ type: key ? "key" : "delta", timestamp: number, data }));
  } catch (e) {
    st.errors++; st.lastError = String(e.message || e);
    resetDecoder(p); askKeyframe(p);
  }
}

// A decoded picture: kept as the pane's newest (closing one not drawn yet) and drawn once the outputs
// waiting now are in. Not at the Worker's animation frame: Chrome runs that with the page's rendering,
// so a busy page thread would hold frames back again (the browser test blocks it to check).
function decoded(p, frame) {
  const meta = p.pending.get(frame.timestamp);
  p.pending.delete(frame.timestamp);
  if (p.newest) { p.newest.frame.close(); p.st.superseded++; }
  p.newest = { frame, meta, decodedAt: performance.now() };
  p.st.decoded++; p.changed = true;
  log(p.decodedLog);
  scheduleDraw();
}

let drawScheduled = false;
function scheduleDraw() {
  if (drawScheduled) return;
  drawScheduled = true;
  setTimeout(draw, 0);
}

function draw() {
  drawScheduled = false;
  for (const p of Object.values(panes)) if (p.newest && !p.drawing && p.canvas) drawPane(p);
}

// One pane's newest frame; a frame decoded meanwhile waits (the newest only) and is drawn next.
async function drawPane(p) {
  const { frame, meta, decodedAt } = p.newest;
  p.newest = null;
  p.drawing = true;
  try {
    // A window sent at twice the size the page shows it is drawn at half (the page would scale it down anyway).
    const step = p.yuv && p.shownWidth && frame.displayWidth >= 2 * p.shownWidth ? 2 : 1;
    const width = Math.floor(frame.displayWidth / step), height = Math.floor(frame.displayHeight / step);
    if (p.canvas.width !== width || p.canvas.height !== height) { p.canvas.width = width; p.canvas.height = height; }
    if (p.yuv && await p.yuv.draw(frame, step)) drawn(p, frame, meta, decodedAt);
    else if (p.yuv) { if (!p.st.lastError) { p.st.lastError = "cannot draw pixel format " + frame.format; p.changed = true; } }
    else { p.ctx.drawImage(frame, 0, 0); drawn(p, frame, meta, decodedAt); }
  } catch (e) {
    p.st.errors++; p.st.lastError = "draw: " + String(e && e.message || e); p.changed = true;
  }
  frame.close();
  p.drawing = false;
  if (p.newest) scheduleDraw();
}

// Draws decoded frames on a 2D context in software (see the top of this file):
// BT.601 limited range, integer tables, `step` 1 (every pixel) or 2 (every other).
function yuvRenderer(ctx) {
  const Y = new Int32Array(256), RV = new Int32Array(256), GU = new Int32Array(256), GV = new Int32Array(256), BU = new Int32Array(256);
  for (let i = 0; i < 256; i++) {
    Y[i] = Math.round(1.16438 * (i - 16) * 1024);
    RV[i] = Math.round(1.59603 * (i - 128) * 1024); GU[i] = Math.round(-0.391762 * (i - 128) * 1024);
    GV[i] = Math.round(-0.812968 * (i - 128) * 1024); BU[i] = Math.round(2.01723 * (i - 128) * 1024);
  }
  const CLAMP = new Uint8Array(2048);
  for (let i = 0; i < 2048; i++) CLAMP[i] = Math.max(0, Math.min(255, i - 512));
  let planes = new Uint8Array(0), image = null, pixels = null;
  return {
    // False for a pixel format it does not know (hardware decoders' RGB formats).
    async draw(frame, step) {
      const nv12 = frame.format === "NV12";
      if (frame.format !== "I420" && !nv12) return false;
      const size = frame.allocationSize();
      if (planes.length < size) planes = new Uint8Array(size);
      const [yl, ul, vl] = await frame.copyTo(planes);
      const rect = frame.visibleRect, width = Math.floor(rect.width / step), height = Math.floor(rect.height / step);
      if (!image || image.width !== width || image.height !== height) {
        image = new ImageData(width, height);
        pixels = new Uint32Array(image.data.buffer);  // little endian: 0xAABBGGRR
      }
      const ys = yl.stride, us = ul.stride, cstep = nv12 ? 2 : 1, vOffset = nv12 ? ul.offset + 1 : vl.offset, vs = nv12 ? us : vl.stride;
      let o = 0;
      for (let r = 0; r < height; r++) {
        const sr = rect.y + r * step, yRow = yl.offset + sr * ys, uRow = ul.offset + (sr >> 1) * us, vRow = vOffset + (sr >> 1) * vs;
        for (let c = 0; c < width; c++) {
          const sc = rect.x + c * step, ci = (sc >> 1) * cstep;
          const u = planes[uRow + ci], v = planes[vRow + ci], y = Y[planes[yRow + sc]];
          pixels[o++] = 0xff000000 | CLAMP[((y + BU[u]) >> 10) + 512] << 16 | CLAMP[((y + GU[u] + GV[v]) >> 10) + 512] << 8 | CLAMP[((y + RV[v]) >> 10) + 512];
        }
      }
      ctx.putImageData(image, 0, 0);
      return true;
    },
  };
}

function log(times) {
  times.push(Date.now());
  if (times.length > 300) times.shift();
}

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

function drawn(p, frame, meta, decodedAt) {
  const st = p.st, now = performance.now();
  st.drawn++;
  log(p.drawnLog);
  p.decodedAt.push(now);
  while (p.decodedAt.length && p.decodedAt[0] < now - 2000) p.decodedAt.shift();
  const span = (now - p.decodedAt[0]) / 1000;
  st.fps = span > 0.2 ? (p.decodedAt.length - 1) / span : 0;
  if (meta) {
    // From the app's draw when its clock is the simulator's (same machine), else from the simulator's arrival.
    const sinceSim = Date.now() - meta.simAt;
    st.latencySource = meta.phoneToSimUs >= 0 ? "app draw" : "simulator arrival";
    p.latencies.push(meta.phoneToSimUs >= 0 ? meta.phoneToSimUs / 1000 + sinceSim : sinceSim);
    if (p.latencies.length > 90) p.latencies.shift();
    p.inDecoder.push(decodedAt - meta.arrived);
    if (p.inDecoder.length > 90) p.inDecoder.shift();
    if (meta.phoneToSimUs >= 0) { p.toSim.push(meta.phoneToSimUs / 1000); if (p.toSim.length > 90) p.toSim.shift(); }
    const sorted = [...p.latencies].sort((a, b) => a - b);
    st.latencyMs = sorted[Math.floor(sorted.length / 2)];
    st.latencyP99Ms = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))];
    st.decoderMs = median(p.inDecoder);
    // The part before the page: the app to the simulator (daemon and bridge included).
    st.toSimMs = p.toSim.length ? median(p.toSim) : null;
  }
  st.width = frame.displayWidth; st.height = frame.displayHeight;
  p.changed = true;
}

// The counters to the page a few times a second (not per frame: the page's thread is not on the frames' path).
setInterval(() => {
  for (const p of Object.values(panes)) {
    if (!p.changed) continue;
    p.changed = false;
    self.postMessage({ type: "stats", screen: p.screen, stats: Object.assign({}, p.st) });
  }
}, 200);

self.onmessage = (e) => {
  const m = e.data;
  switch (m.type) {
    case "canvas": {
      const p = pane(m.screen);
      p.canvas = m.canvas;
      p.ctx = m.canvas.getContext("2d", { alpha: false });
      p.yuv = new URLSearchParams(self.location.search).get("renderer") === "2d" ? null : yuvRenderer(p.ctx);
      p.st.renderer = p.yuv ? "yuv" : "2d";
      break;
    }
    case "streams":
      // m.shown: screen -> the window's width in the page's device pixels (what a frame is drawn at).
      for (const p of Object.values(panes)) {
        if (!(p.screen in m.shown)) resetDecoder(p);
        else p.shownWidth = m.shown[p.screen];
      }
      break;
    case "reset": {
      const p = pane(m.screen);
      resetDecoder(p); askKeyframe(p);
      break;
    }
    case "drawTimes":
      self.postMessage({ type: "drawTimes", id: m.id, times: Object.fromEntries(pane(m.screen).drawAt),
        drawn: pane(m.screen).drawnLog, received: pane(m.screen).receivedLog, decoded: pane(m.screen).decodedLog });
      break;
  }
};

if (!("VideoDecoder" in self)) {
  for (const screen of Object.values(SCREENS)) { pane(screen).st.lastError = "no WebCodecs in this browser"; pane(screen).changed = true; }
}
connect();
