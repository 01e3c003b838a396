// ToolCallParser (net/tool_call_parser.hpp). A character-at-a-time state
// machine, so a delta boundary can fall anywhere (inside a marker, a key, an
// escape) without changing the events' concatenation.
#include "net/tool_call_parser.hpp"

namespace pagoda::net {
namespace {

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralTag = "[TOOL_CALLS]";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view ltrim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}

bool all_space(std::string_view s) { return ltrim(s).empty(); }

// Whether t is a proper prefix of marker (still undecided).
bool partial(std::string_view t, std::string_view marker) { return t.size() < marker.size() && marker.starts_with(t); }

}  // namespace

ToolCallParser::ToolCallParser(ToolFormat format)
    : format_(format), mode_(format == ToolFormat::hermes ? Mode::text : Mode::start) {}

void ToolCallParser::feed(std::string_view text, std::vector<ToolCallEvent>& out) {
  out_ = &out;
  for (char c : text) push(c);
  out_ = nullptr;
}

void ToolCallParser::push(char c) {
  switch (mode_) {
    case Mode::start: return on_start(c);
    case Mode::text: return on_text(c);
    case Mode::call: return on_call(c);
    case Mode::after_call: return on_after_call(c);
    case Mode::expect_call: return on_expect_call(c);
  }
}

void ToolCallParser::emit(ToolCallEvent::Kind kind, std::string_view text) {
  const int32_t index = kind == ToolCallEvent::Kind::content ? 0 : calls_ - 1;
  if (!out_->empty() && kind != ToolCallEvent::Kind::call_begin && out_->back().kind == kind &&
      out_->back().index == index) {
    out_->back().text += text;
    return;
  }
  out_->push_back(ToolCallEvent{kind, index, std::string(text)});
}

void ToolCallParser::content(std::string_view text) {
  if (text.empty()) return;
  if (calls_ > 0 && all_space(text)) {
    ws_hold_ += text;
    return;
  }
  std::string s = std::move(ws_hold_);
  ws_hold_.clear();
  s += text;
  emit(ToolCallEvent::Kind::content, s);
}

// The start of a Llama / Mistral answer: a call, or plain text.
void ToolCallParser::on_start(char c) {
  held_ += c;
  std::string_view t = ltrim(held_);
  if (t.empty()) return;
  const std::string_view tag = format_ == ToolFormat::llama3_json ? kPythonTag : kMistralTag;
  if (partial(t, tag)) return;
  if (t.starts_with(tag)) t = ltrim(t.substr(tag.size()));
  if (t.empty()) return;
  bool undecided = false;
  if (format_ == ToolFormat::mistral && t[0] == '[') {
    t = ltrim(t.substr(1));
    in_array_ = true;
    undecided = t.empty();
  }
  if (undecided) return;
  if (t == "{") {
    std::string raw = std::move(held_);
    held_.clear();
    raw.pop_back();
    begin_call(std::move(raw));
    return on_call('{');
  }
  in_array_ = false;
  // Not a call: the text held so far was a valid prefix; the last character
  // is looked at again as text.
  std::string h = std::move(held_);
  held_.clear();
  const char last = h.back();
  h.pop_back();
  content(h);
  mode_ = Mode::text;
  on_text(last);
}

void ToolCallParser::on_text(char c) {
  const std::string_view marker = format_ == ToolFormat::hermes    ? kHermesOpen
                                  : format_ == ToolFormat::mistral ? kMistralTag
                                                                   : std::string_view();
  if (marker.empty()) return content(std::string_view(&c, 1));
  held_ += c;
  if (partial(held_, marker)) return;
  if (held_ == marker) {
    std::string raw = std::move(held_);
    held_.clear();
    if (format_ == ToolFormat::hermes) return begin_call(std::move(raw));
    held_ = std::move(raw);  // mistral: "[" must follow, as at the start
    mode_ = Mode::start;
    return;
  }
  size_t keep = held_.size() - 1;
  while (keep > 0 && !marker.starts_with(std::string_view(held_).substr(held_.size() - keep))) --keep;
  content(std::string_view(held_).substr(0, held_.size() - keep));
  held_.erase(0, held_.size() - keep);
}

void ToolCallParser::begin_call(std::string raw) {
  mode_ = Mode::call;
  raw_ = std::move(raw);
  scanner_.emplace();
  committed_ = false;
}

void ToolCallParser::on_call(char c) {
  raw_ += c;
  const ToolCallScanner::Step step = scanner_->push(c);
  if (!committed_ && scanner_->has_name()) {
    committed_ = true;
    ++calls_;
    emit(ToolCallEvent::Kind::call_begin, scanner_->name());
  }
  if (committed_) {
    const std::string args = scanner_->take_arguments();
    if (!args.empty()) emit(ToolCallEvent::Kind::arguments, args);
  }
  if (step == ToolCallScanner::Step::done) return end_call();
  if (step == ToolCallScanner::Step::error) return fail_call(c);
}

void ToolCallParser::end_call() {
  if (!committed_) {  // a whole object, but no name: plain text
    content(raw_);
    raw_.clear();
    scanner_.reset();
    in_array_ = false;
    mode_ = Mode::text;
    return;
  }
  if (!scanner_->saw_arguments()) emit(ToolCallEvent::Kind::arguments, "{}");
  scanner_.reset();
  raw_.clear();
  held_.clear();
  committed_ = false;
  mode_ = Mode::after_call;
}

void ToolCallParser::fail_call(char c) {
  if (!committed_) content(std::string_view(raw_).substr(0, raw_.size() - 1));
  scanner_.reset();
  raw_.clear();
  committed_ = false;
  in_array_ = false;
  mode_ = Mode::text;
  on_text(c);
}

void ToolCallParser::to_text(const std::string& held) {
  held_.clear();
  mode_ = Mode::text;
  for (char ch : held) on_text(ch);
}

void ToolCallParser::on_after_call(char c) {
  if (format_ == ToolFormat::hermes) {
    held_ += c;
    const std::string_view t = ltrim(held_);
    if (t.empty() || partial(t, kHermesClose)) return;
    if (t == kHermesClose) {
      held_.clear();
      mode_ = Mode::text;
      return;
    }
    const std::string h = std::move(held_);
    return to_text(h);
  }
  if (is_space(c)) return;
  const char separator = format_ == ToolFormat::llama3_json ? ';' : ',';
  if (c == separator && (format_ == ToolFormat::llama3_json || in_array_)) {
    raw_ = std::string(1, c);
    mode_ = Mode::expect_call;
    return;
  }
  const bool closes = format_ == ToolFormat::mistral && in_array_ && c == ']';
  in_array_ = false;
  mode_ = Mode::text;
  if (!closes) on_text(c);
}

void ToolCallParser::on_expect_call(char c) {
  raw_ += c;
  if (is_space(c)) return;
  if (c == '{') {
    std::string raw = std::move(raw_);
    raw.pop_back();
    begin_call(std::move(raw));
    return on_call('{');
  }
  content(std::string_view(raw_).substr(0, raw_.size() - 1));
  raw_.clear();
  in_array_ = false;
  mode_ = Mode::text;
  on_text(c);
}

void ToolCallParser::finish(std::vector<ToolCallEvent>& out) {
  out_ = &out;
  switch (mode_) {
    case Mode::start:
    case Mode::text: content(held_); break;
    case Mode::call:
      if (!committed_) content(raw_);
      break;
    case Mode::after_call:
      if (!partial(ltrim(held_), kHermesClose)) content(held_);
      break;
    case Mode::expect_call:
      if (calls_ == 0) content(raw_);
      break;
  }
  held_.clear();
  raw_.clear();
  ws_hold_.clear();
  scanner_.reset();
  committed_ = false;
  in_array_ = false;
  mode_ = Mode::text;
  out_ = nullptr;
}

}  // namespace pagoda::net
