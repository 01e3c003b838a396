// Request helpers of the chat page (app.js), no DOM: the chat history of a
// branch, the chat template's text for a continuation, the stats line.
import { chosenText } from "./store.js";

// The chat messages for a user node: the system prompt, then every earlier
// chat turn on the node's branch with its chosen answer, then the node.
// withTools: an answer's tool calls go along as OpenAI tool_calls (the
// /v1/chat/completions form; the WebSocket takes role and content only).
export function chatHistory(c, user, system, withTools = false) {
  const chain = [];
  for (let n = user; n; n = n.parent ? c.nodes[n.parent] : null) chain.unshift(n);
  const messages = [];
  if (system) messages.push({ role: "system", content: system });
  for (let i = 0; i < chain.length - 1; i++) {
    const u = chain[i], a = chain[i + 1];
    if (u.role !== "user" || u.mode !== "chat" || a.role !== "assistant" || a.status === "error") continue;
    const answer = { role: "assistant", content: chosenText(a) };
    const calls = a.samples?.[a.chosen]?.tool_calls;
    if (withTools && calls?.length) {
      answer.tool_calls = calls.map((t) => ({ id: t.id, type: "function", function: { name: t.name, arguments: t.arguments } }));
    }
    messages.push({ role: "user", content: u.text }, answer);
  }
  messages.push({ role: "user", content: user.text });
  return messages;
}

// The chat template's text for `messages` (with the generation prompt),
// from the server's /tokenize and /detokenize; checked to tokenize back to
// the same ids, so a continuation sees exactly what the model saw.
export async function templatedPrompt(messages, apiKey) {
  const post = async (path, body) => {
    const headers = { "Content-Type": "application/json" };
    if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
    const r = await fetch(path, { method: "POST", headers, body: JSON.stringify(body) });
    const data = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(`${path}: ${data.error?.message || r.status}`);
    return data;
  };
  const { tokens } = await post("/tokenize", { messages });
  const { prompt } = await post("/detokenize", { tokens });
  const again = await post("/tokenize", { prompt });
  if (again.tokens.length !== tokens.length || again.tokens.some((t, i) => t !== tokens[i])) {
    throw new Error("this model's chat template does not survive a text round trip; cannot continue exactly");
  }
  return prompt;
}

// "prompt 7 tok · TTFT 120 ms · 41.0 tok/s · 32 tokens" for a run
// {promptTokens, sentAt, firstAt, endAt, tokens, completionTokens, beam, offset, node}.
export function statsText(run) {
  const parts = [];
  if (run.promptTokens !== undefined) parts.push(`prompt ${run.promptTokens} tok`);
  if (run.firstAt) parts.push(`TTFT ${(run.firstAt - run.sentAt).toFixed(0)} ms`);
  const tokens = run.tokens || run.completionTokens || 0;
  const samples = run.beam ? 1 : run.offset === null ? run.node.samples.length : 1;
  if (run.firstAt && tokens > samples) {
    const secs = ((run.endAt || performance.now()) - run.firstAt) / 1000;
    if (secs > 0) parts.push(`${((tokens - samples) / secs).toFixed(1)} tok/s`);
  }
  parts.push(`${run.completionTokens ?? tokens} tokens`);
  return parts.join(" · ");
}
