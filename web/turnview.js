// Views of one transcript message (store.js node): a user bubble with edit /
// copy / branch arrows, and an assistant bubble with its samples in columns
// (each rendered as Markdown, streamed incrementally) or its ranked beams,
// the stats line, and regenerate / continue / copy. Views only draw; the
// callbacks in `actions` (app.js) change the conversation:
//   actions = {onBranch(node, delta), onEdit(node, newText), onRegenerate(node),
//              onContinue(node), onChoose(node, index)}
// Main thread only.
import { MarkdownView, copyButton, renderMarkdown } from "./markdown.js";
import { chosenText, siblings } from "./store.js";

function element(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

function actionButton(text, className, label, onClick) {
  const b = element("button", `act ${className}`, text);
  b.type = "button";
  if (label) { b.setAttribute("aria-label", label); b.title = label; }
  b.addEventListener("click", onClick);
  return b;
}

// "‹ 2/3 ›" for a node with siblings (branches), else nothing.
function branchNav(conv, node, actions) {
  const { index, count } = siblings(conv, node);
  if (count < 2) return null;
  const nav = element("span", "branch");
  const prev = actionButton("‹", "branch-prev", "Previous version", () => actions.onBranch(node, -1));
  const next = actionButton("›", "branch-next", "Next version", () => actions.onBranch(node, 1));
  prev.disabled = index === 0;
  next.disabled = index === count - 1;
  nav.append(prev, element("span", "branch-pos", `${index + 1}/${count}`), next);
  return nav;
}

// A sample's tool calls: one card per call, the function's name and its
// arguments (pretty-printed once they parse as JSON).
function renderToolCalls(box, calls) {
  box.replaceChildren(...(calls || []).filter(Boolean).map((t) => {
    const card = element("div", "tool-call");
    let args = t.arguments;
    try { args = JSON.stringify(JSON.parse(t.arguments), null, 2); } catch { /* still streaming */ }
    card.append(element("span", "tool-name", `call ${t.name}`), element("pre", "tool-args", args));
    return card;
  }));
}

export class UserView {
  constructor(conv, node, actions, busy) {
    this.el = element("div", "msg msg-user");
    this.el.dataset.id = node.id;
    this.conv = conv;
    this.node = node;
    this.actions = actions;
    this.busy = busy;
    this.#show();
  }

  #show() {
    const { node } = this;
    const bubble = element("div", `bubble user${node.mode === "chat" ? "" : " raw"}`, node.text);
    const bar = element("div", "msg-actions");
    const nav = branchNav(this.conv, node, this.actions);
    if (nav) bar.append(nav);
    if (node.mode === "completion") bar.append(element("span", "mode-tag", "completion"));
    const edit = actionButton("Edit", "edit", "Edit this message and send it again", () => this.#editor());
    edit.disabled = this.busy;
    bar.append(edit, copyButton(() => node.text));
    this.el.replaceChildren(bubble, bar);
  }

  #editor() {
    const form = element("form", "edit-form");
    const area = element("textarea", "edit-text");
    area.value = this.node.text;
    area.rows = Math.min(12, Math.max(2, this.node.text.split("\n").length));
    area.setAttribute("aria-label", "Edited message");
    const send = element("button", "primary edit-send", "Send");
    send.type = "submit";
    const cancel = actionButton("Cancel", "edit-cancel", "", () => this.#show());
    form.append(area, element("div", "edit-actions"));
    form.lastChild.append(send, cancel);
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      if (area.value.trim()) this.actions.onEdit(this.node, area.value);
    });
    area.addEventListener("keydown", (e) => {
      if (e.key === "Escape") { e.preventDefault(); this.#show(); }
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); form.requestSubmit(); }
    });
    this.el.replaceChildren(form);
    area.focus();
  }
}

export class AssistantView {
  constructor(conv, node, actions, busy) {
    this.conv = conv;
    this.node = node;
    this.actions = actions;
    this.busy = busy;
    this.el = element("div", "msg msg-assistant");
    this.el.dataset.id = node.id;
    this.reply = element("div", "bubble assistant");
    this.grid = element("div", "samples");
    this.statsEl = element("p", "stats", node.stats || "");
    this.errorEl = null;
    this.bar = element("div", "msg-actions");
    this.reply.append(this.grid, this.statsEl);
    this.el.append(this.reply, this.bar);
    this.views = [];
    this.dirty = new Set();
    if (node.beams) this.renderBeams(node.beams, node.status !== "streaming");
    else this.renderSamples();
    if (node.error) this.showError(node.error);
    this.refreshState();
  }

  // Rebuilds the sample columns from node.samples.
  renderSamples() {
    const { node } = this;
    const count = node.samples.length;
    this.grid.className = "samples";
    this.grid.style.setProperty("--cols", String(Math.min(Math.max(count, 1), 4)));
    this.grid.dataset.count = String(count);
    this.views = node.samples.map((s, i) => {
      const box = element("article", "sample");
      const head = element("header", "sample-head");
      head.append(element("span", "sample-label", count > 1 ? `Sample ${i + 1}` : ""));
      const finish = element("span", "finish", s.finish || "");
      head.append(finish);
      if (count > 1 && node.mode === "chat") {
        const pick = actionButton("Continue with this", "pick", "", () => this.actions.onChoose(node, i));
        head.append(pick);
      }
      const text = element("div", "text md");
      const calls = element("div", "tool-calls");
      box.append(head, text, calls);
      if (s.finish) box.dataset.finish = s.finish;
      const md = new MarkdownView(text);
      md.update(s.text);
      renderToolCalls(calls, s.tool_calls);
      return { box, finish, md, text, calls };
    });
    this.grid.replaceChildren(...this.views.map((v) => v.box));
    this.#markChosen();
  }

  #markChosen() {
    if (this.node.beams) return;
    const many = this.views.length > 1;
    this.views.forEach((v, i) => {
      v.box.classList.toggle("chosen", many && i === this.node.chosen);
      const pick = v.box.querySelector(".pick");
      if (pick) pick.textContent = i === this.node.chosen ? "Chosen" : "Continue with this";
    });
  }

  // Sample i's text changed; drawn on the next flush().
  markDirty(i) { this.dirty.add(i); }

  flush() {
    for (const i of this.dirty) {
      const v = this.views[i], s = this.node.samples[i];
      if (v && s) { v.md.update(s.text); renderToolCalls(v.calls, s.tool_calls); }
    }
    this.dirty.clear();
  }

  renderBeams(beams, final) {
    const list = element("ol", "beams");
    beams.forEach((b, i) => {
      const li = element("li", `beam${b.finished ? " finished" : ""}`);
      const text = element("div", "text md");
      renderMarkdown(b.text, text);
      const meta = element("span", "beam-meta",
        `score ${b.score.toFixed(3)} · logprob ${b.cumulative_logprob.toFixed(2)} · ` +
        `${b.tokens} tokens${b.finished ? ` · ${b.finish_reason}` : " · live"}`);
      li.append(text, meta);
      if (final && this.node.mode === "chat") {
        const chosen = i === this.node.chosen;
        const pick = actionButton(chosen ? "Chosen" : "Continue with this", "pick", "", () => this.actions.onChoose(this.node, i));
        li.classList.toggle("chosen", chosen);
        li.append(pick);
      }
      list.append(li);
    });
    this.grid.className = "beam-view";
    this.grid.replaceChildren(element("h3", "beams-title", final ? "Final beams (best first)" : "Beams (ranked, live)"), list);
  }

  setStats(text) { this.statsEl.textContent = text; }

  showError(message) {
    this.errorEl?.remove();
    this.errorEl = element("p", "notice error", message);
    this.errorEl.setAttribute("role", "alert");
    this.reply.insertBefore(this.errorEl, this.statsEl);
  }

  // Finish reasons, busy state and the action bar from the node.
  refreshState() {
    const { node } = this;
    const streaming = node.status === "streaming";
    this.reply.setAttribute("aria-busy", String(streaming));
    this.el.dataset.status = node.status;
    if (!node.beams) {
      node.samples.forEach((s, i) => {
        const v = this.views[i];
        if (!v) return;
        v.finish.textContent = s.finish || (node.status === "interrupted" ? "interrupted" : "");
        if (s.finish) v.box.dataset.finish = s.finish;
      });
      this.#markChosen();
    }
    this.bar.replaceChildren();
    const nav = branchNav(this.conv, node, this.actions);
    if (nav) this.bar.append(nav);
    if (streaming) return;
    const regen = actionButton("Regenerate", "regenerate", "Generate this answer again (the old one stays as a branch)",
      () => this.actions.onRegenerate(node));
    regen.disabled = this.busy;
    this.bar.append(regen);
    const chosen = node.beams ? null : node.samples[node.chosen];
    if (chosen && chosen.finish === "length") {
      const cont = actionButton("Continue", "continue", "Continue this truncated answer", () => this.actions.onContinue(node));
      cont.disabled = this.busy;
      this.bar.append(cont);
    }
    this.bar.append(copyButton(() => chosenText(node)));
  }
}
