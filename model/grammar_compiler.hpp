// GrammarCompiler: compiles output constraints (JSON schema, any JSON object,
// regex, a choice list, EBNF, structural tags) against one model's
// vocabulary into xgrammar CompiledGrammars, off the caller's thread, with a
// cache (issue 23).
//
// Cache: keyed by the normalised source (grammar_key: the kind plus, for
// JSON documents, the document parsed and re-serialised compactly, so
// whitespace and escapes do not split entries; key order is kept, since it
// is the order of the generated output). LRU, bounded by the compiled
// grammars' memory (CompiledGrammar::MemorySizeBytes, an estimate); the
// most recent entry is always kept. Compile errors are not cached.
// Concurrent requests for one key wait for a single compile.
//
// Threads: `workers` threads compile (each compile may use xgrammar's own
// thread pool of `xgrammar_threads` for the token-mask cache). compile_async's
// callback runs on a worker thread, or on the caller's thread for a cache
// hit; it must not block for long. The destructor finishes the queued
// compiles (their callbacks run) and joins the workers.
// Every public method is thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <xgrammar/compiler.h>

#include "gpu/result.hpp"

namespace pagoda::model {

enum class GrammarKind : uint8_t { json_object, json_schema, regex, choice, ebnf, structural_tag };

struct GrammarSource {
  GrammarKind kind = GrammarKind::json_object;
  std::string spec;                  // the schema / regex / EBNF / structural-tag JSON
  std::vector<std::string> choices;  // kind choice: the allowed outputs (non-empty)
  bool strict = false;               // json_schema: OpenAI's strict (recorded; xgrammar is always strict)
};

using CompiledGrammarPtr = std::shared_ptr<const xgrammar::CompiledGrammar>;

// The normalised cache key of src. Errors: JSON that does not parse (schema,
// structural tag), an empty choice list, an empty regex or grammar.
Result<std::string> grammar_key(const GrammarSource& src);

// Refuses a JSON schema that uses a keyword xgrammar would ignore (not,
// if/then/else, dependentRequired/Schemas, uniqueItems, contains,
// min/maxContains): the error names it and its path ("#/properties/a/not").
Result<void> check_schema_keywords(const std::string& schema);

// The EBNF of a choice list: root ::= "c0" | "c1" | ... (literals escaped).
std::string choice_ebnf(const std::vector<std::string>& choices);

struct GrammarCompilerOptions {
  int32_t workers = 1;
  int32_t xgrammar_threads = 1;
  int64_t cache_bytes = int64_t(256) << 20;
  // JSON: any whitespace between tokens (vLLM's default) or the compact
  // ", " / ": " form (vLLM's --disable-any-whitespace). Small models loop on
  // whitespace, so compact is the default here.
  bool any_whitespace = false;
};

struct GrammarCacheStats {
  uint64_t hits = 0, misses = 0, compiles = 0, errors = 0, evictions = 0;
  int64_t bytes = 0;
  int64_t entries = 0;
  int64_t last_compile_ns = 0;  // wall time of the latest compile
};

class GrammarCompiler {
 public:
  using Done = std::function<void(Result<CompiledGrammarPtr>)>;

  GrammarCompiler(const xgrammar::TokenizerInfo& info, GrammarCompilerOptions options = {});
  ~GrammarCompiler();
  GrammarCompiler(const GrammarCompiler&) = delete;
  GrammarCompiler& operator=(const GrammarCompiler&) = delete;

  // Compiles src (or takes it from the cache) and calls done with the
  // grammar or an Error naming the problem (a bad schema, regex or grammar).
  void compile_async(GrammarSource src, Done done);
  // The same, waiting for the answer (tests, tools).
  Result<CompiledGrammarPtr> compile(const GrammarSource& src);

  GrammarCacheStats stats() const;
  const xgrammar::TokenizerInfo& tokenizer_info() const { return info_; }

 private:
  struct Entry {
    CompiledGrammarPtr grammar;
    int64_t bytes = 0;
    std::list<std::string>::iterator lru;
  };
  struct Job {
    std::string key;
    GrammarSource src;
  };

  void worker();
  Result<CompiledGrammarPtr> compile_now(const GrammarSource& src);
  void insert(const std::string& key, const CompiledGrammarPtr& g);  // mu_ held

  xgrammar::TokenizerInfo info_;
  GrammarCompilerOptions options_;
  std::unique_ptr<xgrammar::GrammarCompiler> xgr_;  // used by the workers only
  std::mutex xgr_mu_;                                // one compile at a time per xgr_

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::deque<Job> queue_;
  std::unordered_map<std::string, std::vector<Done>> waiting_;  // key -> callbacks
  std::unordered_map<std::string, Entry> cache_;
  std::list<std::string> lru_;  // most recent first
  GrammarCacheStats stats_;
  std::vector<std::thread> threads_;
};

}  // namespace pagoda::model
