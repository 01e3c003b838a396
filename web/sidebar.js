// The conversation sidebar: new, open, rename (inline), delete (inline
// confirm), search by title, export/import as JSON. It only draws and
// reports; app.js owns the conversations (store.js) and calls render()
// whenever the list or the open conversation changes.
//
//   const bar = new Sidebar(document.getElementById("conversations"), {
//     onNew, onOpen(id), onRename(id, title), onDelete(id), onExport(), onImport(fileText)});
//   bar.render(listConversations(), currentId);

function button(text, className, label) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = text;
  if (className) b.className = className;
  if (label) { b.setAttribute("aria-label", label); b.title = label; }
  return b;
}

export class Sidebar {
  constructor(root, handlers) {
    this.root = root;
    this.handlers = handlers;
    this.items = [];
    this.current = null;
    this.renaming = null;
    this.confirming = null;
    this.#build();
  }

  #build() {
    const top = document.createElement("div");
    top.className = "conv-top";
    const fresh = button("+ New chat", "primary conv-new");
    fresh.id = "conv-new";
    fresh.addEventListener("click", () => this.handlers.onNew());
    this.search = document.createElement("input");
    this.search.type = "search";
    this.search.id = "conv-search";
    this.search.placeholder = "Search titles";
    this.search.setAttribute("aria-label", "Search conversations by title");
    this.search.addEventListener("input", () => this.#renderList());
    top.append(fresh, this.search);

    this.list = document.createElement("ul");
    this.list.className = "conv-list";
    this.list.id = "conv-list";
    this.list.setAttribute("aria-label", "Conversations");

    const bottom = document.createElement("div");
    bottom.className = "conv-bottom";
    const exp = button("Export", "", "Export all conversations as JSON");
    exp.id = "conv-export";
    exp.addEventListener("click", () => this.handlers.onExport());
    const file = document.createElement("input");
    file.type = "file";
    file.accept = "application/json,.json";
    file.id = "conv-import-file";
    file.className = "visually-hidden";
    file.tabIndex = -1;
    file.addEventListener("change", async () => {
      const f = file.files?.[0];
      if (f) this.handlers.onImport(await f.text());
      file.value = "";
    });
    const imp = button("Import", "", "Import conversations from a JSON export");
    imp.id = "conv-import";
    imp.addEventListener("click", () => file.click());
    this.status = document.createElement("p");
    this.status.className = "conv-status";
    this.status.id = "conv-status";
    this.status.setAttribute("role", "status");
    bottom.append(exp, imp, file, this.status);
    this.root.append(top, this.list, bottom);
  }

  render(items, current) {
    this.items = items;
    this.current = current;
    this.#renderList();
  }

  say(text) { this.status.textContent = text; }

  #renderList() {
    const q = this.search.value.trim().toLowerCase();
    const shown = this.items.filter((e) => !q || (e.title || "").toLowerCase().includes(q));
    const rows = shown.map((e) => this.#row(e));
    if (!rows.length) {
      const li = document.createElement("li");
      li.className = "conv-empty";
      li.textContent = q ? "No title matches." : "No conversations yet.";
      rows.push(li);
    }
    this.list.replaceChildren(...rows);
  }

  #row(entry) {
    const li = document.createElement("li");
    li.className = "conv-item";
    li.dataset.id = entry.id;
    if (entry.id === this.current) li.classList.add("current");
    if (this.renaming === entry.id) return this.#renameRow(li, entry);
    const open = button(entry.title || "Untitled", "conv-open");
    open.title = entry.title || "Untitled";
    if (entry.id === this.current) open.setAttribute("aria-current", "true");
    open.addEventListener("click", () => this.handlers.onOpen(entry.id));
    const rename = button("✎", "conv-rename icon", `Rename “${entry.title}”`);
    rename.addEventListener("click", () => { this.renaming = entry.id; this.#renderList(); });
    let del;
    if (this.confirming === entry.id) {
      del = button("Delete?", "conv-delete confirm danger", `Really delete “${entry.title}”`);
      del.addEventListener("click", () => { this.confirming = null; this.handlers.onDelete(entry.id); });
      del.addEventListener("blur", () => { this.confirming = null; this.#renderList(); });
      queueMicrotask(() => del.focus());
    } else {
      del = button("✕", "conv-delete icon", `Delete “${entry.title}”`);
      del.addEventListener("click", () => { this.confirming = entry.id; this.#renderList(); });
    }
    li.append(open, rename, del);
    return li;
  }

  #renameRow(li, entry) {
    const form = document.createElement("form");
    form.className = "conv-rename-form";
    const input = document.createElement("input");
    input.value = entry.title || "";
    input.setAttribute("aria-label", "New title");
    input.className = "conv-title-input";
    const ok = button("Save", "conv-save");
    ok.type = "submit";
    const done = (save) => {
      this.renaming = null;
      if (save) this.handlers.onRename(entry.id, input.value); else this.#renderList();
    };
    form.addEventListener("submit", (e) => { e.preventDefault(); done(true); });
    input.addEventListener("keydown", (e) => { if (e.key === "Escape") { e.preventDefault(); done(false); } });
    form.append(input, ok);
    li.append(form);
    queueMicrotask(() => { input.focus(); input.select(); });
    return li;
  }
}
