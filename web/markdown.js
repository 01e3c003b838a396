// Safe, incremental Markdown for model answers. Written for this page: no
// dependencies, nothing fetched.
//
// Safety contract: the renderer builds DOM nodes with createElement and
// text nodes only; it never assigns innerHTML or any event-handler
// attribute, so every character of the model's text (including < > & " ')
// ends up as text. The only attributes it sets are: href (http/https URLs
// only, checked with the URL parser), rel="noopener noreferrer",
// target="_blank", class names from a fixed set plus "language-<lang>"
// with <lang> restricted to [A-Za-z0-9_+#.-], start (a number) on <ol>,
// style.textAlign (left/center/right) on table cells.
//
// Grammar (a practical subset of CommonMark + GFM): paragraphs (single
// newlines become <br>), ATX headings, ordered/unordered lists with nesting,
// fenced code blocks (``` or ~~~, language shown, copy button), block quotes,
// tables, thematic breaks; inline: code spans, **strong**, *em*, _em_,
// ~~del~~, [text](url), <url> and bare http(s) URLs, backslash escapes.
//
// Incremental contract (MarkdownView.update): text that extends the previous
// text re-parses and re-renders only from the start of the previous last
// block; finished blocks are never touched again. A block's extent depends
// only on its own lines and the line after it, so appending text can change
// only the last block (and add new ones). Work per update is O(last block +
// new text); `work` counts the characters parsed, for tests.

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const HR = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])(?:[ \t]+(.*)|[ \t]*$)/;
const TABLE_DELIM = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
const BLANK = /^[ \t]*$/;

// ------------------------------------------------------------ block parser

// Splits `text` into lines with their start offsets.
function splitLines(text) {
  const lines = [], starts = [];
  let pos = 0;
  for (;;) {
    const nl = text.indexOf("\n", pos);
    starts.push(pos);
    if (nl < 0) { lines.push(text.slice(pos)); break; }
    lines.push(text.slice(pos, nl));
    pos = nl + 1;
  }
  return { lines, starts };
}

function isTableStart(lines, i) {
  return i + 1 < lines.length && lines[i].includes("|") && TABLE_DELIM.test(lines[i + 1]) &&
    lines[i + 1].includes("-") && (lines[i + 1].includes("|") || lines[i].trim().startsWith("|"));
}

// Does line i start a block other than a paragraph?
function startsBlock(lines, i) {
  const l = lines[i];
  return FENCE.test(l) || HEADING.test(l) || HR.test(l) || QUOTE.test(l) || ITEM.test(l) ||
    isTableStart(lines, i);
}

function listInfo(line) {
  const m = ITEM.exec(line);
  if (!m) return null;
  const marker = m[2];
  const ordered = /\d/.test(marker[0]);
  const content = m[3] ?? "";
  const pad = m[1].length + marker.length + (m[3] === undefined ? 1 : line.length - m[1].length - marker.length - content.length);
  return { ordered, delim: marker[marker.length - 1], start: ordered ? parseInt(marker, 10) : 1,
    indent: m[1].length, contentIndent: Math.min(pad, m[1].length + marker.length + 4), content };
}

function indentOf(line) {
  let n = 0;
  for (const c of line) { if (c === " ") n += 1; else if (c === "\t") n += 4; else break; }
  return n;
}

function dedent(line, n) {
  let i = 0, cut = 0;
  while (i < line.length && cut < n && (line[i] === " " || line[i] === "\t")) {
    cut += line[i] === "\t" ? 4 : 1;
    i += 1;
  }
  return line.slice(i);
}

// Parses lines[from..] into blocks: [{type, line (first line index), ...}].
export function parseBlocks(lines, from = 0) {
  const blocks = [];
  let i = from;
  while (i < lines.length) {
    const line = lines[i];
    if (BLANK.test(line)) { i += 1; continue; }
    const start = i;
    let m;
    if ((m = FENCE.exec(line))) {
      const fence = m[1], body = [];
      const closer = new RegExp(`^ {0,3}${fence[0] === "`" ? "`" : "~"}{${fence.length},}[ \\t]*$`);
      let closed = false;
      for (i += 1; i < lines.length; i++) {
        if (closer.test(lines[i])) { closed = true; i += 1; break; }
        body.push(lines[i]);
      }
      blocks.push({ type: "code", line: start, lang: m[2].replace(/[^A-Za-z0-9_+#.-]/g, ""), text: body.join("\n"), closed });
    } else if ((m = HEADING.exec(line))) {
      blocks.push({ type: "heading", line: start, level: m[1].length, text: m[2] ?? "" });
      i += 1;
    } else if (HR.test(line)) {
      blocks.push({ type: "hr", line: start });
      i += 1;
    } else if (QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) { inner.push(m[1]); i += 1; }
      blocks.push({ type: "quote", line: start, children: parseBlocks(inner) });
    } else if (ITEM.test(line)) {
      i = parseList(lines, i, blocks);
    } else if (isTableStart(lines, i)) {
      i = parseTable(lines, i, blocks);
    } else {
      const para = [line.trim()];
      for (i += 1; i < lines.length && !BLANK.test(lines[i]) && !startsBlock(lines, i); i++) para.push(lines[i].trim());
      blocks.push({ type: "para", line: start, text: para.join("\n") });
    }
  }
  return blocks;
}

// A list: items with the same kind of marker; an item owns the lines
// indented to its content column (nested blocks parsed recursively).
function parseList(lines, i, blocks) {
  const first = listInfo(lines[i]);
  const list = { type: "list", line: i, ordered: first.ordered, start: first.start, items: [] };
  while (i < lines.length) {
    const info = listInfo(lines[i]);
    if (!info || info.ordered !== first.ordered || info.delim !== first.delim || info.indent > first.indent + 1) break;
    const body = [info.content];
    for (i += 1; i < lines.length; i++) {
      const l = lines[i];
      if (BLANK.test(l)) {
        const next = lines[i + 1];
        if (next !== undefined && !BLANK.test(next) && indentOf(next) >= info.contentIndent) { body.push(""); continue; }
        break;
      }
      if (indentOf(l) >= info.contentIndent) { body.push(dedent(l, info.contentIndent)); continue; }
      if (ITEM.test(l) || startsBlock(lines, i)) break;
      body.push(l.trim());  // lazy continuation of the item's paragraph
    }
    list.items.push(parseBlocks(body));
    // A blank line between items keeps the list going.
    if (i < lines.length && BLANK.test(lines[i])) {
      let j = i;
      while (j < lines.length && BLANK.test(lines[j])) j++;
      const next = j < lines.length ? listInfo(lines[j]) : null;
      if (next && next.ordered === first.ordered && next.delim === first.delim && next.indent <= first.indent + 1) i = j;
      else break;
    }
  }
  blocks.push(list);
  return i;
}

function splitRow(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  const cells = [];
  let cur = "";
  for (let k = 0; k < s.length; k++) {
    if (s[k] === "\\" && s[k + 1] === "|") { cur += "|"; k++; continue; }
    if (s[k] === "|") { cells.push(cur.trim()); cur = ""; continue; }
    cur += s[k];
  }
  cells.push(cur.trim());
  return cells;
}

function parseTable(lines, i, blocks) {
  const start = i;
  const head = splitRow(lines[i]);
  const align = splitRow(lines[i + 1]).map((c) =>
    c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : "");
  const rows = [];
  for (i += 2; i < lines.length && !BLANK.test(lines[i]) && lines[i].includes("|"); i++) rows.push(splitRow(lines[i]));
  blocks.push({ type: "table", line: start, head, align, rows });
  return i;
}

// ------------------------------------------------------------ inline parser

const INLINE = [
  { kind: "escape", re: /\\([!-/:-@[-`{-~])/g },
  { kind: "code", re: /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g },
  { kind: "link", re: /\[((?:[^\][]|\[[^\]]*\])*)\]\(\s*<?([^\s()<>]*(?:\([^\s()<>]*\)[^\s()<>]*)*)>?(?:\s+("[^"]*"|'[^']*'))?\s*\)/g },
  { kind: "autolink", re: /<(https?:\/\/[^\s<>]+)>/gi },
  { kind: "url", re: /https?:\/\/[^\s<>"'`]*[^\s<>"'`.,:;!?)\]]/gi },
  { kind: "strong", re: /\*\*(?=\S)([\s\S]*?\S)\*\*/g },
  { kind: "strong", re: /(?<![\p{L}\p{N}_])__(?=\S)([\s\S]*?\S)__(?![\p{L}\p{N}_])/gu },
  { kind: "del", re: /~~(?=\S)([\s\S]*?\S)~~/g },
  { kind: "em", re: /\*(?=[^\s*])([\s\S]*?[^\s*])\*/g },
  { kind: "em", re: /(?<![\p{L}\p{N}_])_(?=[^\s_])([\s\S]*?[^\s_])_(?![\p{L}\p{N}_])/gu },
  { kind: "br", re: /\n/g },
];

// http/https URLs only (checked by the URL parser); anything else is null.
export function safeUrl(raw) {
  try {
    const url = new URL(raw);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : null;
  } catch {
    return null;
  }
}

function link(href, parent) {
  const a = document.createElement("a");
  a.href = href;
  a.rel = "noopener noreferrer";
  a.target = "_blank";
  parent.append(a);
  return a;
}

// Appends the inline rendering of `text` to `parent`. Each pattern's next
// match is cached and searched again only once the scan has passed it, so a
// text costs O(patterns × length) in total.
export function renderInline(text, parent, depth = 0) {
  const next = INLINE.map(() => ({ index: -2 }));
  let pos = 0;
  while (pos < text.length) {
    let best = -1, bestMatch = null;
    INLINE.forEach((p, k) => {
      if (depth > 6 && p.kind !== "escape" && p.kind !== "code" && p.kind !== "br") return;
      let m = next[k];
      if (m !== null && m.index < pos) {
        p.re.lastIndex = pos;
        m = next[k] = p.re.exec(text);
      }
      if (m && (bestMatch === null || m.index < bestMatch.index)) { best = k; bestMatch = m; }
    });
    if (!bestMatch) break;
    if (bestMatch.index > pos) parent.append(text.slice(pos, bestMatch.index));
    emitInline(INLINE[best].kind, bestMatch, parent, depth);
    pos = bestMatch.index + bestMatch[0].length;
  }
  if (pos < text.length) parent.append(text.slice(pos));
}

function emitInline(kind, m, parent, depth) {
  const el = (tag) => { const e = document.createElement(tag); parent.append(e); return e; };
  switch (kind) {
    case "escape": parent.append(m[1]); break;
    case "code": el("code").textContent = m[2].length > 2 && m[2].startsWith(" ") && m[2].endsWith(" ") ? m[2].slice(1, -1) : m[2]; break;
    case "link": {
      const href = safeUrl(m[2]);
      if (href) renderInline(m[1], link(href, parent), depth + 1);
      else { renderInline(m[1], parent, depth + 1); parent.append(m[2] ? ` (${m[2]})` : ""); }
      break;
    }
    case "autolink": case "url": {
      const raw = kind === "url" ? m[0] : m[1];
      const href = safeUrl(raw);
      if (href) link(href, parent).textContent = raw; else parent.append(m[0]);
      break;
    }
    case "br": el("br"); break;
    default: renderInline(m[1], el(kind), depth + 1); break;  // strong, em, del
  }
}

// ------------------------------------------------------------ block render

// Copies text to the clipboard; resolves true on success.
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.append(area);
    area.select();
    let ok = false;
    try { ok = document.execCommand("copy"); } catch { ok = false; }
    area.remove();
    return ok;
  }
}

export function copyButton(getText, label = "Copy") {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "copy";
  b.textContent = label;
  b.addEventListener("click", async () => {
    const ok = await copyText(getText());
    b.textContent = ok ? "Copied" : "Copy failed";
    b.dataset.copied = ok ? "yes" : "no";
    setTimeout(() => { b.textContent = label; }, 1500);
  });
  return b;
}

function renderCode(block) {
  const wrap = document.createElement("div");
  wrap.className = "code-block";
  const head = document.createElement("div");
  head.className = "code-head";
  const lang = document.createElement("span");
  lang.className = "code-lang";
  lang.textContent = block.lang || "text";
  head.append(lang, copyButton(() => block.text, "Copy code"));
  const pre = document.createElement("pre");
  const code = document.createElement("code");
  if (block.lang) code.className = `language-${block.lang}`;
  code.textContent = block.text;
  pre.append(code);
  wrap.append(head, pre);
  return wrap;
}

export function renderBlock(block) {
  const el = (tag) => document.createElement(tag);
  switch (block.type) {
    case "code": return renderCode(block);
    case "heading": { const h = el(`h${block.level}`); renderInline(block.text, h); return h; }
    case "hr": return el("hr");
    case "quote": { const q = el("blockquote"); block.children.forEach((b) => q.append(renderBlock(b))); return q; }
    case "list": {
      const list = el(block.ordered ? "ol" : "ul");
      if (block.ordered && block.start !== 1) list.start = block.start;
      for (const item of block.items) {
        const li = el("li");
        // A one-paragraph item renders tight (no <p>).
        item.forEach((b, k) => {
          if (k === 0 && b.type === "para") renderInline(b.text, li);
          else li.append(renderBlock(b));
        });
        list.append(li);
      }
      return list;
    }
    case "table": {
      const wrap = el("div");
      wrap.className = "table-wrap";
      const table = el("table"), thead = el("thead"), tbody = el("tbody"), hr = el("tr");
      const cell = (tag, text, k) => {
        const c = el(tag);
        if (block.align[k]) c.style.textAlign = block.align[k];
        renderInline(text, c);
        return c;
      };
      block.head.forEach((t, k) => hr.append(cell("th", t, k)));
      thead.append(hr);
      for (const row of block.rows) {
        const tr = el("tr");
        block.head.forEach((_, k) => tr.append(cell("td", row[k] ?? "", k)));
        tbody.append(tr);
      }
      table.append(thead, tbody);
      wrap.append(table);
      return wrap;
    }
    default: { const p = el("p"); renderInline(block.text, p); return p; }
  }
}

// Renders a whole text at once into `container` (replacing its children).
export function renderMarkdown(text, container) {
  container.replaceChildren(...parseBlocks(splitLines(text).lines).map(renderBlock));
}

// Streams one answer into `container`: call update(fullText) as text grows.
export class MarkdownView {
  constructor(container) {
    this.container = container;
    this.text = "";
    this.rendered = [];  // [{offset, el}] in order; offset = char offset of the block's first line
    this.work = 0;       // characters parsed so far (for tests of the incremental contract)
  }

  update(text) {
    if (text === this.text) return;
    let from = 0;
    if (text.startsWith(this.text) && this.rendered.length) {
      // Re-render the last two blocks: the last one may grow, and the one
      // before it may end differently once the last one's first line is
      // complete (a list going on after a blank line).
      const removed = this.rendered.splice(Math.max(0, this.rendered.length - 2));
      for (const r of removed) r.el.remove();
      from = removed[0].offset;
    } else {
      this.container.replaceChildren();
      this.rendered = [];
    }
    this.text = text;
    const tail = text.slice(from);
    this.work += tail.length;
    const { lines, starts } = splitLines(tail);
    for (const block of parseBlocks(lines)) {
      const el = renderBlock(block);
      this.container.append(el);
      this.rendered.push({ offset: from + starts[block.line], el });
    }
  }
}
