// KvMap: draws the engine's KV block pool from `kv` frames (docs/protocol.md)
// on a canvas: one cell per physical block, coloured by the request that owns
// it (free = grey, prefix-cached = pale with a stripe). A block held by more
// than one sequence table (ref > 1: n samples or beams sharing the prompt, or
// requests sharing a cached prefix) gets a dark corner mark: this is
// PagedAttention's sharing made visible. Hovering a cell names its owners.
// Behind a scale-out front end (`pools` in the frame: one block range per
// engine node) each node's pool starts on a new row, after a gap, and the
// summary and tooltips name the node.

const GOLDEN_ANGLE = 137.508;

// A stable colour per engine request id; the page's own requests are
// saturated, other sockets' requests muted.
export function requestColour(requestId, mine) {
  const hue = (Number(requestId) * GOLDEN_ANGLE) % 360;
  return mine ? `hsl(${hue} 70% 48%)` : `hsl(${hue} 25% 62%)`;
}

export class KvMap {
  constructor(canvas, legend, summary, tooltip) {
    this.canvas = canvas;
    this.legend = legend;
    this.summary = summary;
    this.tooltip = tooltip;
    this.frame = null;
    this.cell = 10;
    this.cols = 1;
    this.segments = [];  // [{name, first, total, top}]: one per pool, top in px
    this.highlight = null;  // engine request id to emphasise, or null
    canvas.addEventListener("mousemove", (e) => this.#hover(e));
    canvas.addEventListener("mouseleave", () => { this.tooltip.hidden = true; });
    new ResizeObserver(() => this.draw()).observe(canvas.parentElement);
  }

  update(frame) {
    this.frame = frame;
    this.draw();
    this.#renderLegend();
    this.#renderSummary();
  }

  clear() {
    this.frame = null;
    this.draw();
    this.legend.replaceChildren();
    this.summary.textContent = "No KV snapshot yet.";
    for (const k of ["used", "cached", "mine", "seq"]) delete this.canvas.dataset[k];
  }

  draw() {
    const f = this.frame;
    const ctx = this.canvas.getContext("2d");
    const width = Math.max(120, this.canvas.parentElement.clientWidth);
    const total = f ? f.total : 0;
    // Cells fill the width; big pools get small cells, never under 3 px.
    const ideal = total ? Math.floor(Math.sqrt((width * 260) / total)) : 12;
    this.cell = Math.max(3, Math.min(18, ideal));
    this.cols = Math.max(1, Math.floor(width / this.cell));
    const height = Math.max(this.cell, this.#layout(f));
    const dpr = window.devicePixelRatio || 1;
    this.canvas.style.width = `${this.cols * this.cell}px`;
    this.canvas.style.height = `${height}px`;
    this.canvas.width = Math.ceil(this.cols * this.cell * dpr);
    this.canvas.height = Math.ceil(height * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, this.cols * this.cell, height);
    if (!f) return;
    const style = getComputedStyle(document.documentElement);
    const freeColour = style.getPropertyValue("--kv-free").trim() || "#e3e5e8";
    const cachedColour = style.getPropertyValue("--kv-cached").trim() || "#cfe3f0";
    const markColour = style.getPropertyValue("--kv-mark").trim() || "#111";
    const mine = new Set(Object.keys(f.mine || {}));
    const gap = this.cell >= 6 ? 1 : 0;
    for (let b = 0; b < total; b++) {
      const [x, y] = this.#position(b);
      const s = this.cell - gap;
      const state = f.state[b];
      const owners = f.owners?.[b] || [];
      const dim = this.highlight !== null && !owners.includes(this.highlight);
      ctx.globalAlpha = dim ? 0.25 : 1;
      if (state === "u" && owners.length) {
        this.#fillOwners(ctx, x, y, s, owners, mine);
      } else {
        ctx.fillStyle = state === "c" ? cachedColour : freeColour;
        ctx.fillRect(x, y, s, s);
        if (state === "c" && s >= 6) {
          ctx.strokeStyle = markColour;
          ctx.globalAlpha *= 0.3;
          ctx.beginPath(); ctx.moveTo(x, y + s); ctx.lineTo(x + s, y); ctx.stroke();
          ctx.globalAlpha = dim ? 0.25 : 1;
        }
      }
      if ((f.ref?.[b] || 0) > 1) {  // shared: a dark corner triangle
        const m = Math.max(2, Math.floor(s / 2));
        ctx.fillStyle = markColour;
        ctx.beginPath(); ctx.moveTo(x + s - m, y); ctx.lineTo(x + s, y); ctx.lineTo(x + s, y + m);
        ctx.closePath(); ctx.fill();
      }
    }
    ctx.globalAlpha = 1;
  }

  // One colour per owner: vertical stripes when several requests share it.
  #fillOwners(ctx, x, y, s, owners, mine) {
    const w = s / owners.length;
    owners.forEach((rid, i) => {
      ctx.fillStyle = requestColour(rid, mine.has(String(rid)));
      ctx.fillRect(x + i * w, y, Math.ceil(w), s);
    });
  }

  // Lays the pools out (one segment without `pools`); returns the height in px.
  #layout(f) {
    const gap = Math.max(6, this.cell);
    const pools = f?.pools?.length ? f.pools : [{ name: null, first: 0, total: f ? f.total : 0 }];
    let top = 0;
    this.segments = pools.map((p) => {
      const seg = { name: p.name, first: p.first, total: p.total, top };
      top += Math.max(1, Math.ceil(p.total / this.cols)) * this.cell + gap;
      return seg;
    });
    return top - gap;
  }

  #segmentOf(b) {
    return this.segments.find((s) => b >= s.first && b < s.first + s.total) || this.segments[0];
  }

  #position(b) {
    const s = this.#segmentOf(b), local = b - s.first;
    return [(local % this.cols) * this.cell, s.top + Math.floor(local / this.cols) * this.cell];
  }

  #blockAt(e) {
    if (!this.frame) return -1;
    const r = this.canvas.getBoundingClientRect();
    const col = Math.floor((e.clientX - r.left) / this.cell);
    const py = e.clientY - r.top;
    if (col < 0 || col >= this.cols) return -1;
    for (const s of this.segments) {
      const row = Math.floor((py - s.top) / this.cell);
      const local = row * this.cols + col;
      if (py >= s.top && local < s.total) return s.first + local;
    }
    return -1;
  }

  #hover(e) {
    const b = this.#blockAt(e);
    if (b < 0) { this.tooltip.hidden = true; return; }
    const f = this.frame;
    const names = { u: "used", f: "free", c: "cached (prefix)" };
    const owners = (f.owners?.[b] || []).map((rid) => this.#requestName(rid));
    const seg = this.#segmentOf(b);
    const where = seg.name ? `node ${seg.name}, block ${b - seg.first}` : `block ${b}`;
    this.tooltip.textContent = `${where}: ${names[f.state[b]] || f.state[b]}, ref ${f.ref?.[b] ?? 0}` +
      (owners.length ? `, owners: ${owners.join(", ")}` : "");
    this.tooltip.hidden = false;
    const host = this.canvas.parentElement.getBoundingClientRect();
    this.tooltip.style.left = `${e.clientX - host.left + 12}px`;
    this.tooltip.style.top = `${e.clientY - host.top + 12}px`;
  }

  #requestName(rid) {
    const client = this.frame?.mine?.[String(rid)];
    return client ? `${client} (engine #${rid})` : `engine #${rid}`;
  }

  #renderLegend() {
    const f = this.frame;
    const mine = new Set(Object.keys(f.mine || {}));
    const byRequest = new Map();
    for (const s of f.seqs || []) {
      const entry = byRequest.get(s.request) || { seqs: 0, tokens: 0, blocks: new Set() };
      entry.seqs += 1;
      entry.tokens += s.tokens;
      s.table.forEach((blk) => entry.blocks.add(blk));
      byRequest.set(s.request, entry);
    }
    const items = [...byRequest.entries()].sort((a, b) => a[0] - b[0]).map(([rid, e]) => {
      const li = document.createElement("li");
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = requestColour(rid, mine.has(String(rid)));
      const logical = (f.seqs || []).filter((s) => s.request === rid)
        .reduce((n, s) => n + s.table.length, 0);
      li.append(swatch, `${this.#requestName(rid)}: ${e.seqs} seq, ${e.tokens} tokens, ` +
        `${e.blocks.size} blocks for ${logical} table entries`);
      li.tabIndex = 0;
      const on = () => { this.highlight = rid; this.draw(); };
      const off = () => { this.highlight = null; this.draw(); };
      li.addEventListener("mouseenter", on); li.addEventListener("focus", on);
      li.addEventListener("mouseleave", off); li.addEventListener("blur", off);
      return li;
    });
    this.legend.replaceChildren(...items);
  }

  #renderSummary() {
    const f = this.frame;
    const shared = (f.ref || []).filter((r) => r > 1).length;
    const pc = f.prefix_cache || {};
    const hit = pc.queried_tokens ? ` · prefix hits ${(100 * pc.hit_tokens / pc.queried_tokens).toFixed(1)}%` : "";
    this.summary.textContent = `${f.total} blocks × ${f.block_size} tokens: ${f.used} used, ` +
      `${f.cached} cached, ${f.free} free, ${shared} shared · ${f.running} running, ` +
      `${f.waiting} waiting${hit}` +
      (f.pools?.length ? ` · ${f.pools.length} nodes: ` + f.pools.map((p) =>
        `${p.name} ${p.used}/${p.total} used`).join(", ") : "");
    this.canvas.setAttribute("aria-label", `KV block map. ${this.summary.textContent}`);
    // Machine-readable counts (tests, tooling): blocks used, and held by this page's requests.
    const mine = new Set(Object.keys(f.mine || {}).map(Number));
    this.canvas.dataset.used = String(f.used);
    this.canvas.dataset.cached = String(f.cached);
    this.canvas.dataset.mine = String((f.owners || []).filter((o) => o.some((r) => mine.has(r))).length);
    this.canvas.dataset.seq = String(f.seq);
  }
}
