// The Pagoda chat page: wires the form controls, the transcript and the KV
// map to one PagodaSocket (wsclient.js). No build step, no dependencies.
import { PagodaSocket } from "./wsclient.js";
import { KvMap } from "./kvmap.js";

const $ = (id) => document.getElementById(id);
const KEY_STORAGE = "pagoda.apiKey";
const SETTINGS_STORAGE = "pagoda.sampling";

const sock = new PagodaSocket();
const kvMap = new KvMap($("kv-canvas"), $("kv-legend"), $("kv-summary"), $("kv-tip"));
const turns = [];          // {user, mode, samples: [{text}], chosen, done, el}
const active = new Set();  // ids of requests still streaming

// ------------------------------------------------------------- connection

function connect() {
  sock.connect(localStorage.getItem(KEY_STORAGE) || "");
}

sock.addEventListener("state", (e) => {
  const { state, detail } = e.detail;
  document.body.dataset.conn = state;
  $("conn-text").textContent = state === "open" ? "Connected"
    : state === "connecting" ? "Connecting…" : `Disconnected${detail ? ` (${detail})` : ""}`;
  $("reconnect").textContent = state === "closed" ? "Reconnect" : "Disconnect";
  if (state === "closed") {
    $("model").textContent = "";
    kvMap.clear();
  }
  updateButtons();
});

sock.addEventListener("hello", (e) => {
  const h = e.detail;
  $("model").textContent = `${h.model} · context ${h.max_model_len}`;
  $("max_tokens").max = h.max_model_len;
  updateButtons();
});

sock.addEventListener("kv", (e) => kvMap.update(e.detail));
sock.addEventListener("error-frame", (e) => addNotice(e.detail));

$("reconnect").addEventListener("click", () => {
  if (sock.state === "closed") connect(); else sock.close();
});

$("key-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const key = $("api-key").value.trim();
  if (key) localStorage.setItem(KEY_STORAGE, key); else localStorage.removeItem(KEY_STORAGE);
  connect();
});

$("kv-live").addEventListener("change", (e) => sock.setKvSubscription(e.target.checked));

// --------------------------------------------------------------- settings

const NUMBER_FIELDS = ["temperature", "top_p", "top_k", "min_p", "repetition_penalty",
  "max_tokens", "seed", "n", "beam_width"];

function readSettings() {
  const params = {};
  for (const name of NUMBER_FIELDS) {
    const input = $(name);
    if (input.value === "") continue;  // blank: the server's default
    const v = Number(input.value);
    if (!Number.isFinite(v)) continue;
    params[name] = v;
  }
  const stop = $("stop-strings").value.split("|").filter((s) => s.length > 0);
  if (stop.length) params.stop = stop;
  if (params.beam_width > 0) {  // beam search ignores the sampling knobs
    for (const k of ["temperature", "top_p", "top_k", "min_p", "seed"]) delete params[k];
    params.n = Math.min(params.n ?? 1, params.beam_width);
  } else {
    delete params.beam_width;
  }
  return params;
}

function saveSettings() {
  const saved = {};
  for (const name of [...NUMBER_FIELDS, "stop-strings", "system"]) saved[name] = $(name).value;
  saved.mode = document.querySelector("input[name=mode]:checked").value;
  localStorage.setItem(SETTINGS_STORAGE, JSON.stringify(saved));
}

function loadSettings() {
  let saved = {};
  try { saved = JSON.parse(localStorage.getItem(SETTINGS_STORAGE) || "{}"); } catch { /* default */ }
  for (const [name, value] of Object.entries(saved)) {
    if (name === "mode") {
      const radio = document.querySelector(`input[name=mode][value="${value}"]`);
      if (radio) radio.checked = true;
    } else if ($(name)) {
      $(name).value = value;
    }
  }
  $("api-key").value = localStorage.getItem(KEY_STORAGE) || "";
}

$("sampling").addEventListener("change", saveSettings);
$("sampling").addEventListener("submit", (e) => e.preventDefault());
document.querySelectorAll("input[name=mode]").forEach((r) => r.addEventListener("change", saveSettings));
$("reset-settings").addEventListener("click", () => {
  localStorage.removeItem(SETTINGS_STORAGE);
  location.reload();
});

// ------------------------------------------------------------- transcript

function element(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

function scrollToEnd() {
  const t = $("transcript");
  if (t.scrollHeight - t.scrollTop - t.clientHeight < 160) t.scrollTop = t.scrollHeight;
}

function addNotice(frame) {
  const el = element("div", "notice error", `${frame.code}: ${frame.message}`);
  el.setAttribute("role", "alert");
  $("transcript").append(el);
  scrollToEnd();
}

function history() {
  const messages = [];
  const system = $("system").value.trim();
  if (system) messages.push({ role: "system", content: system });
  for (const t of turns) {
    if (t.mode !== "chat" || !t.done || t.error) continue;
    messages.push({ role: "user", content: t.user });
    messages.push({ role: "assistant", content: t.samples[t.chosen]?.text ?? "" });
  }
  return messages;
}

function renderSamples(turn, count) {
  turn.grid.replaceChildren();
  turn.grid.style.setProperty("--cols", String(Math.min(count, 4)));
  turn.samples = [];
  for (let i = 0; i < count; i++) {
    const box = element("article", "sample");
    const head = element("header", "sample-head");
    const label = element("span", "sample-label", count > 1 ? `Sample ${i + 1}` : "");
    const finish = element("span", "finish");
    head.append(label, finish);
    const text = element("div", "text");
    box.append(head, text);
    if (count > 1 && turn.mode === "chat") {
      const pick = element("button", "pick", "Continue with this");
      pick.type = "button";
      pick.addEventListener("click", () => choose(turn, i));
      head.append(pick);
    }
    turn.grid.append(box);
    turn.samples.push({ text: "", tokens: 0, box, textEl: text, finishEl: finish, dirty: false });
  }
  if (count > 1) choose(turn, 0);
}

function choose(turn, index) {
  turn.chosen = index;
  turn.samples.forEach((s, i) => s.box.classList.toggle("chosen", i === index));
}

function renderBeams(turn, beams, final) {
  const list = element("ol", "beams");
  beams.forEach((b, i) => {
    const li = element("li", `beam${b.finished ? " finished" : ""}`);
    const meta = element("span", "beam-meta",
      `score ${b.score.toFixed(3)} · logprob ${b.cumulative_logprob.toFixed(2)} · ` +
      `${b.token_ids.length} tokens${b.finished ? ` · ${b.finish_reason}` : " · live"}`);
    li.append(element("div", "text", b.text), meta);
    if (final && turn.mode === "chat") {
      const pick = element("button", "pick", i === turn.chosen ? "Chosen" : "Continue with this");
      pick.type = "button";
      pick.addEventListener("click", () => { turn.chosen = i; renderBeams(turn, beams, true); });
      li.append(pick);
    }
    list.append(li);
  });
  turn.grid.replaceChildren(element("h3", "beams-title", final ? "Final beams (best first)" : "Beams (ranked, live)"), list);
  turn.samples = beams.map((b) => ({ text: b.text }));
}

function flush(turn) {
  for (const s of turn.samples) {
    if (s.dirty) { s.textEl.textContent = s.text; s.dirty = false; }
  }
  turn.rafPending = false;
  scrollToEnd();
}

function statsText(turn, extra = "") {
  const now = performance.now();
  const parts = [];
  if (turn.promptTokens !== undefined) parts.push(`prompt ${turn.promptTokens} tok`);
  if (turn.firstAt) parts.push(`TTFT ${(turn.firstAt - turn.sentAt).toFixed(0)} ms`);
  const tokens = turn.samples.reduce((n, s) => n + (s.tokens || 0), 0) || turn.completionTokens || 0;
  if (turn.firstAt && tokens > 1) {
    const secs = ((turn.endAt || now) - turn.firstAt) / 1000;
    if (secs > 0) parts.push(`${((tokens - turn.samplesCount) / secs).toFixed(1)} tok/s`);
  }
  parts.push(`${tokens} tokens`);
  return parts.join(" · ") + extra;
}

// ------------------------------------------------------------------- send

function send(text) {
  const mode = document.querySelector("input[name=mode]:checked").value;
  const params = readSettings();
  if (mode === "chat") params.messages = [...history(), { role: "user", content: text }];
  else params.prompt = text;

  const el = element("section", "turn");
  el.append(element("div", `bubble user${mode === "chat" ? "" : " raw"}`, text));
  const reply = element("div", "bubble assistant");
  reply.setAttribute("aria-busy", "true");
  const grid = element("div", "samples");
  const stats = element("p", "stats", "waiting…");
  reply.append(grid, stats);
  el.append(reply);
  $("transcript").append(el);

  const turn = { user: text, mode, chosen: 0, done: false, el, reply, grid, stats,
    samples: [], sentAt: performance.now(), samplesCount: params.n ?? 1, beam: params.beam_width > 0 };
  turns.push(turn);
  renderSamples(turn, turn.beam ? 0 : turn.samplesCount);
  const id = sock.generate(params, {
    onAccepted: (f) => {
      turn.promptTokens = f.prompt_tokens;
      if (!turn.beam && f.n !== turn.samples.length) renderSamples(turn, f.n);
      turn.samplesCount = f.n || 1;
      stats.textContent = statsText(turn);
    },
    onToken: (f) => {
      turn.firstAt ??= performance.now();
      const s = turn.samples[f.index];
      if (!s) return;
      s.text += f.text;
      if (f.token_id !== undefined) s.tokens += 1;
      s.dirty = true;
      if (!turn.rafPending) {
        turn.rafPending = true;
        requestAnimationFrame(() => {
          flush(turn);
          if (!turn.done) stats.textContent = statsText(turn);
        });
      }
    },
    onBeams: (f) => {
      turn.firstAt ??= performance.now();
      renderBeams(turn, f.beams, false);
      scrollToEnd();
    },
    onDone: (f) => finish(turn, id, f),
    onError: (f) => fail(turn, id, f),
  });
  if (id === null) {
    fail(turn, null, { code: "disconnected", message: "not connected" });
    return;
  }
  turn.id = id;
  active.add(id);
  updateButtons();
  scrollToEnd();
}

function finish(turn, id, f) {
  active.delete(id);
  turn.done = true;
  turn.endAt = performance.now();
  turn.completionTokens = f.usage?.completion_tokens;
  if (turn.beam && f.beams) {
    turn.chosen = 0;
    renderBeams(turn, f.beams, true);
  } else {
    flush(turn);
    f.finish_reasons?.forEach((r, i) => {
      const s = turn.samples[i];
      if (s) { s.finishEl.textContent = r; s.box.dataset.finish = r; }
    });
  }
  const reasons = [...new Set(f.finish_reasons || [])].join(", ");
  turn.stats.textContent = statsText(turn, reasons ? ` · finish: ${reasons}` : "");
  turn.reply.setAttribute("aria-busy", "false");
  updateButtons();
}

function fail(turn, id, f) {
  if (id !== null) active.delete(id);
  turn.done = true;
  turn.error = true;
  if (!turn.beam) flush(turn);
  const err = element("p", "notice error", `${f.code}: ${f.message}`);
  err.setAttribute("role", "alert");
  turn.reply.append(err);
  turn.stats.textContent = statsText(turn);
  turn.reply.setAttribute("aria-busy", "false");
  updateButtons();
  scrollToEnd();
}

function updateButtons() {
  const ready = sock.state === "open" && sock.hello !== null;
  $("send").disabled = !ready;
  $("stop").disabled = active.size === 0;
}

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("prompt").value;
  if (!text.trim() || $("send").disabled) return;
  $("prompt").value = "";
  send(text);
});

$("prompt").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});

$("stop").addEventListener("click", () => { for (const id of active) sock.cancel(id); });

$("clear").addEventListener("click", () => {
  for (const id of active) sock.cancel(id);
  turns.length = 0;
  $("transcript").replaceChildren();
});

loadSettings();
sock.kvWanted = $("kv-live").checked;
kvMap.clear();
connect();
