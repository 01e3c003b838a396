#include "model/grammar_compiler.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <future>

#include <simdjson.h>
#include <xgrammar/grammar.h>

#include "model/json_value.hpp"

namespace pagoda::model {
namespace {

const char* kind_tag(GrammarKind k) {
  switch (k) {
    case GrammarKind::json_object: return "json_object";
    case GrammarKind::json_schema: return "json_schema";
    case GrammarKind::regex: return "regex";
    case GrammarKind::choice: return "choice";
    case GrammarKind::ebnf: return "grammar";
    case GrammarKind::structural_tag: return "structural_tag";
  }
  return "?";
}

// A JSON document re-serialised compactly (key order kept).
Result<std::string> compact_json(const std::string& text, const char* what) {
  auto v = parse_json(text);
  if (!v) return make_error(std::string(what) + " is not valid JSON: " + v.error().message);
  JsonDumpOptions o;
  o.item_separator = ",";
  o.key_separator = ":";
  auto s = to_json(*v, o);
  if (!s) return make_error(std::string(what) + ": " + s.error().message);
  return std::move(s).value();
}

void append_ebnf_literal(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\" \"\\x%02x", unsigned(c));  // own literal: no hex run-on
      out += buf;
      out += "\" \"";
    } else {
      out += char(c);
    }
  }
  out += '"';
}

// Keywords xgrammar 0.2.9 ignores with a warning (json_schema_converter.cc):
// a schema using one would be enforced only in part, so it is refused.
constexpr std::string_view kUnsupportedKeywords[] = {
    "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
    "uniqueItems", "contains", "minContains", "maxContains"};
// Keywords whose value is a map of name -> schema, or one schema, or a list of schemas.
constexpr std::string_view kSchemaMaps[] = {"properties", "$defs", "definitions", "patternProperties"};
constexpr std::string_view kSchemaValues[] = {"items", "additionalProperties", "propertyNames",
                                              "additionalItems", "unevaluatedItems", "unevaluatedProperties"};
constexpr std::string_view kSchemaLists[] = {"anyOf", "oneOf", "allOf", "prefixItems"};

template <size_t N>
bool listed(const std::string_view (&names)[N], std::string_view key) {
  return std::find(std::begin(names), std::end(names), key) != std::end(names);
}

// The first unsupported keyword in the schema v (its path), or "".
std::string unsupported_keyword(simdjson::dom::element v, const std::string& path) {
  simdjson::dom::object obj;
  if (v.get_object().get(obj) != simdjson::SUCCESS) return {};
  for (auto f : obj) {
    const std::string at = path + "/" + std::string(f.key);
    if (listed(kUnsupportedKeywords, f.key)) return at;
    std::string found;
    if (listed(kSchemaMaps, f.key)) {
      simdjson::dom::object m;
      if (f.value.get_object().get(m) != simdjson::SUCCESS) continue;
      for (auto sub : m) {
        if (found.empty()) found = unsupported_keyword(sub.value, at + "/" + std::string(sub.key));
      }
    } else if (listed(kSchemaValues, f.key)) {
      found = unsupported_keyword(f.value, at);
    } else if (listed(kSchemaLists, f.key)) {
      simdjson::dom::array a;
      if (f.value.get_array().get(a) != simdjson::SUCCESS) continue;
      size_t i = 0;
      for (simdjson::dom::element e : a) {
        if (found.empty()) found = unsupported_keyword(e, at + "/" + std::to_string(i));
        ++i;
      }
    }
    if (!found.empty()) return found;
  }
  return {};
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string choice_ebnf(const std::vector<std::string>& choices) {
  std::string out = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += " | ";
    append_ebnf_literal(out, choices[i]);
  }
  return out;
}

Result<std::string> grammar_key(const GrammarSource& src) {
  std::string key = kind_tag(src.kind);
  key += '\n';
  switch (src.kind) {
    case GrammarKind::json_object:
      return key;
    case GrammarKind::json_schema:
    case GrammarKind::structural_tag: {
      auto c = compact_json(src.spec, src.kind == GrammarKind::json_schema ? "the JSON schema"
                                                                           : "the structural tag");
      if (!c) return c.error();
      return key + *c;
    }
    case GrammarKind::regex:
      if (src.spec.empty()) return make_error("the regex is empty");
      return key + src.spec;
    case GrammarKind::ebnf:
      if (src.spec.empty()) return make_error("the grammar is empty");
      return key + src.spec;
    case GrammarKind::choice:
      if (src.choices.empty()) return make_error("the choice list is empty");
      return key + choice_ebnf(src.choices);
  }
  return make_error("unknown grammar kind");
}

GrammarCompiler::GrammarCompiler(const xgrammar::TokenizerInfo& info, GrammarCompilerOptions options)
    : info_(info), options_(options) {
  xgr_ = std::make_unique<xgrammar::GrammarCompiler>(info_, std::max(options_.xgrammar_threads, 1),
                                                     /*cache_enabled=*/false);
  for (int32_t i = 0; i < std::max(options_.workers, 1); ++i) threads_.emplace_back([this] { worker(); });
}

GrammarCompiler::~GrammarCompiler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void GrammarCompiler::compile_async(GrammarSource src, Done done) {
  auto key = grammar_key(src);
  if (!key) return done(key.error());
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (auto it = cache_.find(*key); it != cache_.end()) {
      ++stats_.hits;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      CompiledGrammarPtr g = it->second.grammar;
      lock.unlock();
      return done(std::move(g));
    }
    ++stats_.misses;
    auto [w, first] = waiting_.try_emplace(*key);
    w->second.push_back(std::move(done));
    if (!first) return;  // a compile of this key is queued or running
    queue_.push_back({*key, std::move(src)});
  }
  cv_.notify_one();
}

Result<CompiledGrammarPtr> GrammarCompiler::compile(const GrammarSource& src) {
  std::promise<Result<CompiledGrammarPtr>> p;
  auto f = p.get_future();
  compile_async(src, [&p](Result<CompiledGrammarPtr> r) { p.set_value(std::move(r)); });
  return f.get();
}

GrammarCacheStats GrammarCompiler::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void GrammarCompiler::worker() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    const int64_t t0 = now_ns();
    Result<CompiledGrammarPtr> r = compile_now(job.src);
    std::vector<Done> done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.last_compile_ns = now_ns() - t0;
      ++stats_.compiles;
      if (r) insert(job.key, *r);
      else ++stats_.errors;
      auto it = waiting_.find(job.key);
      if (it != waiting_.end()) {
        done = std::move(it->second);
        waiting_.erase(it);
      }
    }
    for (Done& d : done) d(r);
  }
}

Result<void> check_schema_keywords(const std::string& schema) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(schema).get(doc) != simdjson::SUCCESS) return make_error("the JSON schema is not valid JSON");
  const std::string at = unsupported_keyword(doc, "#");
  if (at.empty()) return {};
  return make_error("unsupported JSON schema keyword '" + at.substr(at.rfind('/') + 1) + "' at " + at +
                    " (it would not be enforced)");
}

Result<CompiledGrammarPtr> GrammarCompiler::compile_now(const GrammarSource& src) {
  if (src.kind == GrammarKind::json_schema) {
    if (auto ok = check_schema_keywords(src.spec); !ok) return ok.error();
  }
  std::lock_guard<std::mutex> lock(xgr_mu_);
  const char* what = kind_tag(src.kind);
  try {
    xgrammar::CompiledGrammar g = [&] {
      const bool ws = options_.any_whitespace;
      switch (src.kind) {
        case GrammarKind::json_object:
          return xgr_->CompileJSONSchema(R"({"type":"object"})", ws, std::nullopt, std::nullopt,
                                         /*strict_mode=*/false);
        case GrammarKind::json_schema:
          return xgr_->CompileJSONSchema(src.spec, ws, std::nullopt, std::nullopt, /*strict_mode=*/true);
        case GrammarKind::regex: return xgr_->CompileRegex(src.spec);
        case GrammarKind::choice: return xgr_->CompileGrammar(choice_ebnf(src.choices), "root");
        case GrammarKind::ebnf: return xgr_->CompileGrammar(src.spec, "root");
        case GrammarKind::structural_tag: return xgr_->CompileStructuralTag(src.spec);
      }
      throw std::runtime_error("unknown grammar kind");
    }();
    return std::make_shared<const xgrammar::CompiledGrammar>(std::move(g));
  } catch (const std::exception& e) {
    return make_error(std::string("invalid ") + what + ": " + e.what());
  }
}

void GrammarCompiler::insert(const std::string& key, const CompiledGrammarPtr& g) {
  if (cache_.count(key) != 0) return;
  const int64_t bytes = int64_t(g->MemorySizeBytes()) + int64_t(key.size());
  lru_.push_front(key);
  cache_[key] = Entry{g, bytes, lru_.begin()};
  stats_.bytes += bytes;
  while (stats_.bytes > options_.cache_bytes && lru_.size() > 1) {
    auto victim = cache_.find(lru_.back());
    stats_.bytes -= victim->second.bytes;
    cache_.erase(victim);
    lru_.pop_back();
    ++stats_.evictions;
  }
  stats_.entries = int64_t(cache_.size());
}

}  // namespace pagoda::model
