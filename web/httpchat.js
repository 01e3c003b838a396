// Chat requests that the /v1/ws protocol does not carry (tools, an answer
// JSON schema) go through the OpenAI API instead: POST /v1/chat/completions
// with stream: true, read as server-sent events. The callbacks mirror
// PagodaSocket.generate's (wsclient.js), so app.js streams either into the
// same node:
//   onAccepted({n})                      the stream started
//   onToken({index, text, token_id})     content text of choice `index`
//   onToolCall({index, call, id, name, arguments})  a tool call's first delta
//                                        (id, name) or an argument fragment
//   onDone({finish_reasons, usage})      the end ([DONE])
//   onError({code, message})             an HTTP error or an error event
// Returns {cancel()}, which aborts the request (the server cancels it).
// Main thread only.

function errorOf(body, status) {
  const e = body && body.error;
  return { code: (e && (e.code || e.type)) || `http_${status}`, message: (e && e.message) || `HTTP ${status}` };
}

// Applies one chunk to the callbacks; collects finish reasons and usage.
function applyChunk(chunk, cb, state) {
  if (chunk.error) { state.failed = true; cb.onError(errorOf(chunk, 500)); return; }
  if (chunk.usage) state.usage = chunk.usage;
  for (const c of chunk.choices || []) {
    const d = c.delta || {};
    if (d.content) cb.onToken({ index: c.index, text: d.content, token_id: 0 });
    for (const t of d.tool_calls || []) {
      cb.onToolCall({ index: c.index, call: t.index, id: t.id, name: t.function?.name,
        arguments: t.function?.arguments || "" });
    }
    if (c.finish_reason) state.finish[c.index] = c.finish_reason;
  }
}

async function run(body, apiKey, cb, controller) {
  const headers = { "Content-Type": "application/json" };
  if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
  const r = await fetch("/v1/chat/completions", {
    method: "POST", headers, signal: controller.signal,
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
  });
  if (!r.ok) { cb.onError(errorOf(await r.json().catch(() => null), r.status)); return; }
  cb.onAccepted({ n: body.n ?? 1 });
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  const state = { finish: [], usage: null, failed: false };
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffered.indexOf("\n\n")) >= 0) {
      const event = buffered.slice(0, cut);
      buffered = buffered.slice(cut + 2);
      const data = event.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
      if (data === "[DONE]") { cb.onDone({ finish_reasons: state.finish, usage: state.usage }); return; }
      if (data) applyChunk(JSON.parse(data), cb, state);
      if (state.failed) return;
    }
  }
  cb.onError({ code: "disconnected", message: "the stream ended before [DONE]" });
}

export function httpChat(body, apiKey, callbacks) {
  const controller = new AbortController();
  run(body, apiKey, callbacks, controller).catch((err) => {
    if (err.name !== "AbortError") callbacks.onError({ code: "network", message: err.message });
    else callbacks.onDone({ finish_reasons: [], usage: null });
  });
  return { cancel: () => controller.abort() };
}
