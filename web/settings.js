// The sampling panel: reads the form into /v1/ws generate fields and keeps
// it in localStorage ("pagoda.sampling"). The settings are GLOBAL: one set
// for every conversation (a conversation stores its messages, not its
// settings). Main thread only.
const $ = (id) => document.getElementById(id);
const SETTINGS_STORAGE = "pagoda.sampling";
const NUMBER_FIELDS = ["temperature", "top_p", "top_k", "min_p", "repetition_penalty",
  "max_tokens", "seed", "n", "beam_width"];
const TEXT_FIELDS = ["stop-strings", "system", "tools", "answer-schema", "tool_choice"];
const CHECK_FIELDS = ["ignore_eos"];

export const currentMode = () => document.querySelector("input[name=mode]:checked").value;
export const systemPrompt = () => $("system").value.trim();

// The chat-only OpenAI fields of the form: {tools?, tool_choice?,
// response_format?}, or {error} when a box does not hold the JSON it needs.
export function readChatExtras() {
  const out = {};
  const tools = $("tools").value.trim(), schema = $("answer-schema").value.trim();
  try {
    if (tools) {
      out.tools = JSON.parse(tools);
      if (!Array.isArray(out.tools)) return { error: "Tools must be a JSON array" };
      out.tool_choice = $("tool_choice").value;
    }
    if (schema) {
      out.response_format = { type: "json_schema", json_schema: { name: "answer", schema: JSON.parse(schema), strict: true } };
    }
  } catch (e) {
    return { error: `${tools && !out.tools ? "Tools" : "Answer JSON schema"}: ${e.message}` };
  }
  return out;
}

// The generate fields for the form's values (blank = the server's default).
export function readSettings() {
  const params = {};
  for (const name of NUMBER_FIELDS) {
    const input = $(name);
    if (input.value === "") continue;
    const v = Number(input.value);
    if (!Number.isFinite(v)) continue;
    params[name] = v;
  }
  const stop = $("stop-strings").value.split("|").filter((s) => s.length > 0);
  if (stop.length) params.stop = stop;
  if ($("ignore_eos").checked) params.ignore_eos = true;
  if (params.beam_width > 0) {  // beam search ignores the sampling knobs and takes no stop strings
    for (const k of ["temperature", "top_p", "top_k", "min_p", "seed", "stop"]) delete params[k];
    params.n = Math.min(params.n ?? 1, params.beam_width);
  } else {
    delete params.beam_width;
  }
  return params;
}

function saveSettings() {
  const saved = {};
  for (const name of [...NUMBER_FIELDS, ...TEXT_FIELDS]) saved[name] = $(name).value;
  for (const name of CHECK_FIELDS) saved[name] = $(name).checked;
  saved.mode = currentMode();
  localStorage.setItem(SETTINGS_STORAGE, JSON.stringify(saved));
}

function loadSettings() {
  let saved = {};
  try { saved = JSON.parse(localStorage.getItem(SETTINGS_STORAGE) || "{}") || {}; } catch { /* defaults */ }
  for (const [name, value] of Object.entries(saved)) {
    if (name === "mode") {
      const radio = document.querySelector(`input[name=mode][value="${value === "completion" ? "completion" : "chat"}"]`);
      if (radio) radio.checked = true;
    } else if (CHECK_FIELDS.includes(name) && $(name)) {
      $(name).checked = value === true;
    } else if ([...NUMBER_FIELDS, ...TEXT_FIELDS].includes(name) && typeof value === "string") {
      $(name).value = value;
    }
  }
}

export function initSettings() {
  loadSettings();
  $("sampling").addEventListener("change", saveSettings);
  $("sampling").addEventListener("input", saveSettings);
  $("sampling").addEventListener("submit", (e) => e.preventDefault());
  document.querySelectorAll("input[name=mode]").forEach((r) => r.addEventListener("change", saveSettings));
  $("reset-settings").addEventListener("click", () => {
    localStorage.removeItem(SETTINGS_STORAGE);
    $("sampling").reset();
    document.querySelector("input[name=mode][value=chat]").checked = true;
  });
}
