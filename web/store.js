// Conversations kept in the browser's localStorage.
//
// A conversation is a tree of messages, as llama-server's UI keeps it:
// regenerating an answer or editing a user message adds a sibling (a branch)
// instead of overwriting, and each node remembers which child is selected,
// so the shown transcript is the path root -> selected child -> ... .
//
//   conversation = {id, title, created, updated, roots: [nodeId], sel, nodes: {nodeId: node}}
//   user node      = {id, parent, children, sel, role: "user", mode: "chat"|"completion", text}
//   assistant node = {id, parent, children, sel, role: "assistant", mode,
//                     samples: [{text, finish, tokens}], chosen,
//                     beams: null | [{text, score, cumulative_logprob, tokens, finished, finish_reason}],
//                     stats, error, status: "streaming"|"done"|"error"|"interrupted"}
//
// Storage layout: "pagoda.conv.index" = [{id, title, updated}],
// "pagoda.conv.<id>" = the conversation, "pagoda.conv.current" = the open id.
// Sampling settings are global (one set for every conversation), kept by
// app.js under "pagoda.sampling".

const INDEX_KEY = "pagoda.conv.index";
const CURRENT_KEY = "pagoda.conv.current";
const convKey = (id) => `pagoda.conv.${id}`;
export const EXPORT_FORMAT = "pagoda-conversations";

function newId(prefix) {
  const rand = crypto.getRandomValues(new Uint32Array(2));
  return `${prefix}${Date.now().toString(36)}${rand[0].toString(36)}${rand[1].toString(36)}`;
}

function readJson(key, fallback) {
  try {
    const v = JSON.parse(localStorage.getItem(key) ?? "null");
    return v ?? fallback;
  } catch {
    return fallback;
  }
}

// Throws a readable Error when the browser refuses (quota, private mode).
function writeJson(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
  } catch (err) {
    throw new Error(`could not save to the browser's storage (${err.name}): export and delete old conversations`);
  }
}

export function listConversations() {
  const index = readJson(INDEX_KEY, []);
  return Array.isArray(index) ? index.filter((e) => e && typeof e.id === "string")
    .sort((a, b) => (b.updated || 0) - (a.updated || 0)) : [];
}

function writeIndexEntry(conv) {
  const index = listConversations().filter((e) => e.id !== conv.id);
  index.push({ id: conv.id, title: conv.title, updated: conv.updated });
  writeJson(INDEX_KEY, index);
}

export function createConversation(title = "New chat") {
  const now = Date.now();
  return { id: newId("c"), title, created: now, updated: now, roots: [], sel: 0, nodes: {} };
}

export function loadConversation(id) {
  const conv = readJson(convKey(id), null);
  return conv && typeof conv === "object" && conv.nodes ? conv : null;
}

export function saveConversation(conv, touch = true) {
  if (touch) conv.updated = Date.now();
  writeJson(convKey(conv.id), conv);
  writeIndexEntry(conv);
}

export function deleteConversation(id) {
  localStorage.removeItem(convKey(id));
  writeJson(INDEX_KEY, listConversations().filter((e) => e.id !== id));
  if (localStorage.getItem(CURRENT_KEY) === id) localStorage.removeItem(CURRENT_KEY);
}

export function renameConversation(conv, title) {
  conv.title = title.trim().slice(0, 200) || "Untitled";
  saveConversation(conv, false);
}

export const currentId = () => localStorage.getItem(CURRENT_KEY);
export const setCurrentId = (id) => localStorage.setItem(CURRENT_KEY, id);

// ------------------------------------------------------------------ tree

function childList(conv, parentId) {
  return parentId === null ? conv.roots : conv.nodes[parentId].children;
}

// The shown transcript: root -> selected child -> ... .
export function path(conv) {
  const out = [];
  let list = conv.roots, sel = conv.sel;
  while (list.length) {
    const node = conv.nodes[list[Math.min(Math.max(sel, 0), list.length - 1)]];
    if (!node) break;
    out.push(node);
    list = node.children;
    sel = node.sel;
  }
  return out;
}

// Adds a node under parentId (null: a root) and selects it.
export function addNode(conv, parentId, fields) {
  const node = { ...fields, id: newId("m"), parent: parentId, children: [], sel: 0 };
  conv.nodes[node.id] = node;
  const list = childList(conv, parentId);
  list.push(node.id);
  selectIndex(conv, parentId, list.length - 1);
  return node;
}

function selectIndex(conv, parentId, index) {
  if (parentId === null) conv.sel = index; else conv.nodes[parentId].sel = index;
}

// {index, count} of a node among its siblings.
export function siblings(conv, node) {
  const list = childList(conv, node.parent);
  return { index: list.indexOf(node.id), count: list.length };
}

export function selectSibling(conv, node, delta) {
  const list = childList(conv, node.parent);
  const index = list.indexOf(node.id) + delta;
  if (index < 0 || index >= list.length) return false;
  selectIndex(conv, node.parent, index);
  return true;
}

// The text an assistant node contributes to the chat history.
export function chosenText(node) {
  if (node.beams) return node.beams[node.chosen]?.text ?? "";
  return node.samples?.[node.chosen]?.text ?? "";
}

// --------------------------------------------------------- export/import

export function exportAll() {
  const conversations = listConversations().map((e) => loadConversation(e.id)).filter(Boolean);
  return JSON.stringify({ format: EXPORT_FORMAT, version: 1, exported: new Date().toISOString(), conversations }, null, 1);
}

const str = (v, max = 1 << 20) => (typeof v === "string" ? v.slice(0, max) : "");
const num = (v) => (Number.isFinite(v) ? v : undefined);

// Rebuilds one node from untrusted JSON: only known fields, right types.
function cleanNode(raw, ids) {
  const node = {
    id: str(raw.id, 100), parent: ids.has(raw.parent) ? raw.parent : null,
    children: Array.isArray(raw.children) ? raw.children.filter((c) => ids.has(c)) : [],
    sel: Number.isInteger(raw.sel) ? raw.sel : 0,
    role: raw.role === "user" ? "user" : "assistant",
    mode: raw.mode === "completion" ? "completion" : "chat",
  };
  if (node.role === "user") { node.text = str(raw.text); return node; }
  node.samples = (Array.isArray(raw.samples) ? raw.samples : []).slice(0, 64).map((s) => ({
    text: str(s?.text), finish: str(s?.finish, 20) || null, tokens: num(s?.tokens) ?? 0 }));
  node.beams = Array.isArray(raw.beams) ? raw.beams.slice(0, 16).map((b) => ({
    text: str(b?.text), score: num(b?.score) ?? 0, cumulative_logprob: num(b?.cumulative_logprob) ?? 0,
    tokens: num(b?.tokens) ?? 0, finished: b?.finished === true, finish_reason: str(b?.finish_reason, 20) || null })) : null;
  node.chosen = Number.isInteger(raw.chosen) ? raw.chosen : 0;
  node.stats = str(raw.stats, 500);
  node.error = raw.error ? str(raw.error, 2000) : null;
  node.status = ["done", "error"].includes(raw.status) ? raw.status : "interrupted";
  return node;
}

// Imports an export file's text; returns the number of conversations added.
// Conversations whose id already exists get a new id (nothing is overwritten).
export function importAll(text) {
  let data;
  try { data = JSON.parse(text); } catch (err) { throw new Error(`not JSON: ${err.message}`); }
  if (!data || data.format !== EXPORT_FORMAT || !Array.isArray(data.conversations)) {
    throw new Error(`not a Pagoda conversations export (format "${EXPORT_FORMAT}" expected)`);
  }
  const existing = new Set(listConversations().map((e) => e.id));
  let added = 0;
  for (const raw of data.conversations) {
    if (!raw || typeof raw !== "object" || !raw.nodes || typeof raw.nodes !== "object") continue;
    const ids = new Set(Object.keys(raw.nodes));
    const nodes = {};
    for (const [id, n] of Object.entries(raw.nodes)) if (n && typeof n === "object") nodes[id] = { ...cleanNode(n, ids), id };
    const conv = {
      id: typeof raw.id === "string" && !existing.has(raw.id) ? raw.id.slice(0, 100) : newId("c"),
      title: str(raw.title, 200) || "Imported chat",
      created: num(raw.created) ?? Date.now(), updated: num(raw.updated) ?? Date.now(),
      roots: Array.isArray(raw.roots) ? raw.roots.filter((r) => nodes[r]) : [],
      sel: Number.isInteger(raw.sel) ? raw.sel : 0, nodes,
    };
    existing.add(conv.id);
    saveConversation(conv, false);
    added += 1;
  }
  return added;
}
