// The Pagoda chat page: one PagodaSocket (wsclient.js), the conversations
// (store.js, sidebar.js), the transcript views (turnview.js), scroll
// following (follow.js), the sampling panel (settings.js) and the KV map.
// No build step, no dependencies. Main thread only.
//
// Generation: a run streams into an assistant node of a conversation; the
// node is the data, its view (if the conversation is on screen) redraws on
// the next animation frame. Runs keep going when another conversation is
// opened; they are saved when they end (and every SAVE_EVERY_MS meanwhile).
import { PagodaSocket } from "./wsclient.js";
import { httpChat } from "./httpchat.js";
import { KvMap } from "./kvmap.js";
import { Follower } from "./follow.js";
import { Sidebar } from "./sidebar.js";
import { AssistantView, UserView } from "./turnview.js";
import { currentMode, initSettings, readChatExtras, readSettings, systemPrompt } from "./settings.js";
import * as store from "./store.js";
import { chatHistory, statsText, templatedPrompt } from "./prompts.js";

const $ = (id) => document.getElementById(id);
const KEY_STORAGE = "pagoda.apiKey";
const SAVE_EVERY_MS = 2000;

const sock = new PagodaSocket();
const kvMap = new KvMap($("kv-canvas"), $("kv-legend"), $("kv-summary"), $("kv-tip"));
const follower = new Follower($("transcript"), $("jump"));
const runs = new Map();   // assistant node id -> run {conv, node, id, ...}
const views = new Map();  // node id -> view of the conversation on screen
let conv = null;          // the conversation on screen

// ------------------------------------------------------------- connection

const apiKey = () => localStorage.getItem(KEY_STORAGE) || "";
const connect = () => sock.connect(apiKey());

sock.addEventListener("state", (e) => {
  const { state, detail } = e.detail;
  document.body.dataset.conn = state;
  $("conn-text").textContent = state === "open" ? "Connected"
    : state === "connecting" ? "Connecting…" : `Disconnected${detail ? ` (${detail})` : ""}`;
  $("reconnect").textContent = state === "closed" ? "Reconnect" : "Disconnect";
  if (state === "closed") { $("model").textContent = ""; kvMap.clear(); }
  updateButtons();
});

sock.addEventListener("hello", (e) => {
  const h = e.detail;
  document.body.dataset.ready = "true";
  $("model").textContent = `${h.model} · context ${h.max_model_len}`;
  $("max_tokens").max = h.max_model_len;
  updateButtons();
});

sock.addEventListener("kv", (e) => kvMap.update(e.detail));
sock.addEventListener("error-frame", (e) => notice(`${e.detail.code}: ${e.detail.message}`));
$("reconnect").addEventListener("click", () => { if (sock.state === "closed") connect(); else sock.close(); });
$("key-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const key = $("api-key").value.trim();
  if (key) localStorage.setItem(KEY_STORAGE, key); else localStorage.removeItem(KEY_STORAGE);
  connect();
});
$("kv-live").addEventListener("change", (e) => sock.setKvSubscription(e.target.checked));

function notice(text) {
  const el = document.createElement("div");
  el.className = "notice error";
  el.textContent = text;
  el.setAttribute("role", "alert");
  $("transcript").append(el);
  follower.contentChanged();
}

function save(c = conv) {
  if (c.deleted) return;  // a run of a deleted conversation ending
  try { store.saveConversation(c); } catch (err) { notice(err.message); }
}

// ---------------------------------------------------------- conversations

const sidebar = new Sidebar($("conversations"), {
  onNew: () => openConversation(null),
  onOpen: (id) => openConversation(id),
  onRename: (id, title) => {
    const c = id === conv?.id ? conv : store.loadConversation(id);
    if (c) { try { store.renameConversation(c, title); } catch (err) { notice(err.message); } }
    if (conv) $("conv-title").textContent = conv.title;
    refreshSidebar();
  },
  onDelete: (id) => {
    for (const run of runs.values()) if (run.conv.id === id) { run.conv.deleted = true; cancelRun(run); }
    if (id === conv?.id) conv.deleted = true;
    store.deleteConversation(id);
    if (id === conv?.id) openConversation(store.listConversations()[0]?.id ?? null);
    else refreshSidebar();
  },
  onExport: exportConversations,
  onImport: (text) => {
    try {
      const n = store.importAll(text);
      sidebar.say(`Imported ${n} conversation${n === 1 ? "" : "s"}.`);
    } catch (err) {
      sidebar.say(`Import failed: ${err.message}`);
    }
    refreshSidebar();
  },
});

function refreshSidebar() { sidebar.render(store.listConversations(), conv?.id ?? null); }

// id null: a fresh conversation (reusing the open one when it is empty).
function openConversation(id) {
  let next = id ? (id === conv?.id ? conv : store.loadConversation(id)) : null;
  if (!next && conv && !conv.deleted && conv.roots.length === 0 && !id) next = conv;
  if (!next) { next = store.createConversation(); save(next); }
  // A run of this conversation still streaming keeps writing into its own
  // copy of the nodes: show that copy.
  for (const run of runs.values()) if (run.conv.id === next.id) next = run.conv;
  markInterrupted(next);
  conv = next;
  store.setCurrentId(conv.id);
  document.body.classList.remove("convs-open");
  renderTranscript();
  refreshSidebar();
  follower.follow(true);
}

// Nodes saved mid-stream by an earlier page are no longer streaming.
function markInterrupted(c) {
  for (const node of Object.values(c.nodes)) {
    if (node.status === "streaming" && !runs.has(node.id)) node.status = "interrupted";
  }
}

function exportConversations() {
  const blob = new Blob([store.exportAll()], { type: "application/json" });
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = `pagoda-conversations-${new Date().toISOString().slice(0, 10)}.json`;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  sidebar.say("Exported.");
}

// ------------------------------------------------------------- transcript

const actions = {
  onBranch: (node, delta) => { if (store.selectSibling(conv, node, delta)) { save(); renderTranscript(); } },
  onEdit: (node, text) => {
    if (busy()) return;
    const user = store.addNode(conv, node.parent, { role: "user", mode: node.mode, text });
    startAnswer(conv, user);
  },
  onRegenerate: (node) => { if (!busy()) startAnswer(conv, conv.nodes[node.parent]); },
  onContinue: (node) => { if (!busy()) continueAnswer(conv, node); },
  onChoose: (node, index) => {
    node.chosen = index;
    save();
    const view = views.get(node.id);
    if (node.beams) view?.renderBeams(node.beams, true);
    view?.refreshState();
  },
};

const busy = () => runs.size > 0;

function renderTranscript() {
  views.clear();
  const els = [];
  for (const node of store.path(conv)) {
    const View = node.role === "user" ? UserView : AssistantView;
    const view = new View(conv, node, actions, busy());
    views.set(node.id, view);
    els.push(view.el);
  }
  if (!els.length) {
    const hint = document.createElement("p");
    hint.className = "empty-hint";
    hint.textContent = "Start the conversation below. Answers render as Markdown; conversations stay in this browser.";
    els.push(hint);
  }
  $("transcript").replaceChildren(...els);
  $("conv-title").textContent = conv.title;
}

// Redraws the action bars (enabled or not) after a run starts or ends.
function refreshActions() {
  for (const view of views.values()) {
    view.busy = busy();
    if (view instanceof AssistantView) view.refreshState();
    else if (!view.el.querySelector("form")) view.el.querySelectorAll(".edit").forEach((b) => { b.disabled = busy(); });
  }
  updateButtons();
}

// ------------------------------------------------------------ generation

function send(text) {
  const mode = currentMode();
  const bad = mode === "chat" ? readChatExtras().error : undefined;
  if (bad) { notice(bad); return; }
  const last = store.path(conv).at(-1);
  if (conv.roots.length === 0 && conv.title === "New chat") conv.title = text.trim().split("\n")[0].slice(0, 48) || "New chat";
  const user = store.addNode(conv, last ? last.id : null, { role: "user", mode, text });
  startAnswer(conv, user);
}

// A new assistant node under `user`, streamed from a generate request.
function startAnswer(c, user) {
  const params = readSettings();
  const beam = params.beam_width > 0;
  if (user.mode === "chat") {
    const extras = readChatExtras();
    if (extras.error) { notice(extras.error); return; }
    Object.assign(params, extras);
    params.messages = chatHistory(c, user, systemPrompt(), viaHttp(params));
  } else {
    params.prompt = user.text;
  }
  const count = beam ? 0 : params.n ?? 1;
  const node = store.addNode(c, user.id, {
    role: "assistant", mode: user.mode, chosen: 0, beams: null, stats: "waiting…", error: null,
    status: "streaming", samples: Array.from({ length: count }, () => ({ text: "", finish: null, tokens: 0 })),
  });
  save(c);
  if (c === conv) { renderTranscript(); refreshSidebar(); }
  follower.follow(true);
  launch({ conv: c, node, params, beam, offset: null });
}

// Continues the chosen sample of a truncated answer: the prompt is the
// conversation so far plus the partial answer, as raw text.
async function continueAnswer(c, node) {
  const user = c.nodes[node.parent];
  const sample = node.samples[node.chosen];
  const params = readSettings();
  delete params.beam_width;
  params.n = 1;
  const finish = sample.finish;
  node.status = "streaming";
  sample.finish = null;
  views.get(node.id)?.refreshState();
  let prefix = user.text;
  if (user.mode === "chat") {
    try {
      prefix = await templatedPrompt(chatHistory(c, user, systemPrompt()), apiKey());
    } catch (err) {
      node.status = "done";
      sample.finish = finish;
      views.get(node.id)?.refreshState();
      notice(`continue: ${err.message}`);
      return;
    }
  }
  params.prompt = prefix + sample.text;
  follower.follow(true);
  launch({ conv: c, node, params, beam: false, offset: node.chosen });
}

// Sends the request of run = {conv, node, params, beam, offset} and streams
// it into run.node. offset: the sample that index 0 continues, or null.
function launch(run) {
  const { node } = run;
  Object.assign(run, { sentAt: performance.now(), firstAt: null, tokens: 0, lastSave: performance.now() });
  const draw = () => {
    run.raf = 0;
    const view = views.get(node.id);
    if (view) { view.flush(); view.setStats(statsText(run)); }
    follower.contentChanged();
    if (performance.now() - run.lastSave > SAVE_EVERY_MS) { run.lastSave = performance.now(); save(run.conv); }
  };
  const callbacks = {
    onAccepted: (f) => {
      run.promptTokens = f.prompt_tokens;
      if (!run.beam && run.offset === null && f.n !== node.samples.length) {
        node.samples = Array.from({ length: f.n }, () => ({ text: "", finish: null, tokens: 0 }));
        views.get(node.id)?.renderSamples();
      }
      views.get(node.id)?.setStats(statsText(run));
    },
    onToken: (f) => {
      run.firstAt ??= performance.now();
      const index = run.offset ?? f.index;
      const s = node.samples[index];
      if (!s) return;
      s.text += f.text;
      if (f.token_id !== undefined) { s.tokens += 1; run.tokens += 1; }
      views.get(node.id)?.markDirty(index);
      run.raf ||= requestAnimationFrame(draw);
    },
    onBeams: (f) => {
      run.firstAt ??= performance.now();
      node.beams = f.beams.map(beamOf);
      views.get(node.id)?.renderBeams(node.beams, false);
      follower.contentChanged();
    },
    onToolCall: (f) => {
      run.firstAt ??= performance.now();
      const s = node.samples[f.index];
      if (!s) return;
      s.tool_calls ??= [];
      if (f.id) s.tool_calls[f.call] = { id: f.id, name: f.name, arguments: "" };
      if (s.tool_calls[f.call]) s.tool_calls[f.call].arguments += f.arguments;
      views.get(node.id)?.markDirty(f.index);
      run.raf ||= requestAnimationFrame(draw);
    },
    onDone: (f) => end(run, f, null),
    onError: (f) => end(run, null, `${f.code}: ${f.message}`),
  };
  if (viaHttp(run.params)) {
    run.http = httpChat(run.params, apiKey(), callbacks);
  } else {
    const id = sock.generate(run.params, callbacks);
    if (id === null) { end(run, null, "disconnected: not connected"); return; }
    run.id = id;
  }
  runs.set(node.id, run);
  document.body.dataset.streaming = "true";
  refreshActions();
}

// Tools and answer schemas are OpenAI API fields the WebSocket does not carry.
const viaHttp = (params) => params.tools !== undefined || params.response_format !== undefined;
const cancelRun = (run) => (run.http ? run.http.cancel() : sock.cancel(run.id));

const beamOf = (b) => ({ text: b.text, score: b.score, cumulative_logprob: b.cumulative_logprob,
  tokens: b.token_ids.length, finished: b.finished, finish_reason: b.finish_reason });

function end(run, done, error) {
  const { node } = run;
  if (run.raf) cancelAnimationFrame(run.raf);
  runs.delete(node.id);
  run.endAt = performance.now();
  const view = views.get(node.id);
  view?.flush();
  if (done) {
    run.completionTokens = done.usage?.completion_tokens;
    if (run.beam && done.beams) {
      node.beams = done.beams.map(beamOf);
      node.chosen = 0;
      view?.renderBeams(node.beams, true);
    } else {
      done.finish_reasons?.forEach((r, i) => {
        const s = node.samples[run.offset ?? i];
        if (s) s.finish = r;
      });
    }
    const reasons = [...new Set(done.finish_reasons || [])].join(", ");
    node.stats = statsText(run) + (reasons ? ` · finish: ${reasons}` : "");
    node.status = "done";
  } else {
    node.error = error;
    node.status = run.offset === null ? "error" : "done";  // a failed continuation keeps the answer
    node.stats = statsText(run);
    view?.showError(error);
  }
  view?.setStats(node.stats);
  save(run.conv);
  if (!runs.size) delete document.body.dataset.streaming;
  refreshActions();
  follower.contentChanged();
}

// --------------------------------------------------------------- controls

function updateButtons() {
  $("send").disabled = !(sock.state === "open" && sock.hello !== null);
  $("stop").disabled = runs.size === 0;
}

function stopAll() { for (const run of runs.values()) cancelRun(run); }

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

document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && document.body.classList.contains("convs-open")) { closeDrawer(); return; }
  if (e.key === "Escape" && runs.size && !e.target.closest?.("form.edit-form, .conv-rename-form")) stopAll();
});

$("stop").addEventListener("click", stopAll);
// The sidebar: a drawer on narrow screens (convs-open), collapsible on wide ones (convs-hidden).
$("toggle-convs").addEventListener("click", () => {
  const narrow = window.matchMedia("(max-width: 900px)").matches;
  const cls = narrow ? "convs-open" : "convs-hidden";
  const on = document.body.classList.toggle(cls);
  $("toggle-convs").setAttribute("aria-expanded", String(narrow ? on : !on));
  if (narrow && on) $("conv-new").focus();
});
function closeDrawer() {
  if (!document.body.classList.contains("convs-open")) return;
  document.body.classList.remove("convs-open");
  $("toggle-convs").setAttribute("aria-expanded", "false");
  $("toggle-convs").focus();
}
$("convs-close").addEventListener("click", closeDrawer);

initSettings();
$("api-key").value = apiKey();
sock.kvWanted = $("kv-live").checked;
kvMap.clear();
openConversation(store.currentId() ?? store.listConversations()[0]?.id ?? null);
connect();
