// PagodaSocket: a small client for the /v1/ws protocol (docs/protocol.md,
// version 1). One WebSocket, many requests multiplexed by client-chosen ids.
//
// Usage:
//   const sock = new PagodaSocket();
//   sock.addEventListener("hello", e => ...);      // e.detail = hello frame
//   sock.addEventListener("state", e => ...);      // e.detail = "connecting" | "open" | "closed"
//   sock.addEventListener("kv", e => ...);         // e.detail = kv frame
//   sock.addEventListener("error-frame", e => ...) // errors without a request id
//   sock.connect(apiKey);
//   const id = sock.generate(params, {onAccepted, onToken, onBeams, onDone, onError});
//   sock.cancel(id);
// Request callbacks: exactly one of onDone / onError ends a request; when the
// socket closes, every open request gets onError({code: "disconnected"}).

const PROTOCOL_VERSION = 1;

export class PagodaSocket extends EventTarget {
  constructor(url = PagodaSocket.defaultUrl()) {
    super();
    this.url = url;
    this.ws = null;
    this.state = "closed";
    this.hello = null;
    this.requests = new Map();  // id -> callbacks
    this.nextId = 1;
    this.kvWanted = false;
  }

  static defaultUrl() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    return `${scheme}//${location.host}/v1/ws`;
  }

  // Opens the socket. The API key (optional) travels as the subprotocol
  // token "bearer.<key>" when it is a valid token, else as ?api_key=.
  connect(apiKey = "") {
    this.close();
    this.hello = null;
    let url = this.url;
    const protocols = [];
    if (apiKey) {
      if (/^[A-Za-z0-9._~+-]+$/.test(apiKey)) protocols.push(`bearer.${apiKey}`);
      else url += `?api_key=${encodeURIComponent(apiKey)}`;
    }
    let ws;
    try {
      ws = protocols.length ? new WebSocket(url, protocols) : new WebSocket(url);
    } catch (err) {
      this.#setState("closed", String(err));
      return;
    }
    this.ws = ws;
    this.#setState("connecting");
    ws.addEventListener("open", () => { if (this.ws === ws) this.#setState("open"); });
    ws.addEventListener("message", (e) => { if (this.ws === ws) this.#onMessage(e.data); });
    ws.addEventListener("close", (e) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.#failAll(e.code === 1009 ? "frame too big (closed 1009)" : `connection closed (${e.code})`);
      const why = e.reason || (e.code === 1006
        ? "could not connect: server down, API key needed or wrong, or Origin not allowed"
        : `code ${e.code}`);
      this.#setState("closed", why);
    });
  }

  close() {
    if (!this.ws) return;
    const ws = this.ws;
    this.ws = null;
    ws.close(1000, "bye");
    this.#failAll("connection closed by the page");
    this.#setState("closed", "closed by the page");
  }

  // Starts a request; returns its id (or null when the socket is not open).
  generate(params, callbacks) {
    if (this.state !== "open") return null;
    const id = `r${this.nextId++}`;
    this.requests.set(id, callbacks);
    this.#send({ type: "generate", id, ...params });
    return id;
  }

  cancel(id) {
    if (this.requests.has(id)) this.#send({ type: "cancel", id });
  }

  setKvSubscription(on) {
    this.kvWanted = on;
    if (this.state === "open") this.#send({ type: on ? "kv_subscribe" : "kv_unsubscribe" });
  }

  #send(frame) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(frame));
  }

  #setState(state, detail = "") {
    this.state = state;
    this.dispatchEvent(new CustomEvent("state", { detail: { state, detail } }));
  }

  #failAll(message) {
    const open = [...this.requests.values()];
    this.requests.clear();
    for (const cb of open) cb.onError?.({ code: "disconnected", message });
  }

  #onMessage(data) {
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      this.dispatchEvent(new CustomEvent("error-frame", { detail: { code: "client", message: "unparsable frame from the server" } }));
      return;
    }
    if (frame.type === "hello") {
      this.hello = frame;
      if (frame.v !== PROTOCOL_VERSION) console.warn("protocol version", frame.v);
      if (this.kvWanted) this.#send({ type: "kv_subscribe" });
      this.dispatchEvent(new CustomEvent("hello", { detail: frame }));
      return;
    }
    if (frame.type === "kv") {
      this.dispatchEvent(new CustomEvent("kv", { detail: frame }));
      return;
    }
    const cb = typeof frame.id === "string" ? this.requests.get(frame.id) : undefined;
    switch (frame.type) {
      case "accepted": cb?.onAccepted?.(frame); break;
      case "token": cb?.onToken?.(frame); break;
      case "beams": cb?.onBeams?.(frame); break;
      case "done":
        this.requests.delete(frame.id);
        cb?.onDone?.(frame);
        break;
      case "error":
        if (cb && frame.code !== "duplicate_id" && frame.code !== "unknown_id") {
          this.requests.delete(frame.id);
          cb.onError?.(frame);
        } else {
          this.dispatchEvent(new CustomEvent("error-frame", { detail: frame }));
        }
        break;
      default: break;  // newer frame types: ignored (protocol §Versioning)
    }
  }
}
