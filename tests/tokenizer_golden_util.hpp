// Shared helpers of the tokenizer tests: the corpus and the HF goldens made by
// tools/gen-tokenizer-corpus.py and tools/gen-tokenizer-goldens.py, and a
// comparison that counts mismatches and prints the first few.
#pragma once

#include <gtest/gtest.h>
#include <simdjson.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "model/incremental_decoder.hpp"
#include "model/tokenizer.hpp"

namespace pagoda::model::test {

inline std::string tokenizer_data(const std::string& name) {
  return std::string(PAGODA_TEST_DATA_DIR) + "/tokenizer/" + name;
}

inline std::string smollm2_path() {
  const char* env = std::getenv("PAGODA_MODEL");
  if (env && *env) return env;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/pagoda/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

inline std::string llama2_model_path() {
  return std::string(PAGODA_SHARED_DIR) + "/tokenizers/llama2-spm/tokenizer.model";
}

inline std::vector<int32_t> to_ids(simdjson::dom::array arr) {
  std::vector<int32_t> ids;
  for (simdjson::dom::element e : arr) ids.push_back(static_cast<int32_t>(int64_t(e)));
  return ids;
}

inline std::vector<std::string> load_corpus() {
  std::ifstream in(tokenizer_data("corpus.jsonl"));
  std::vector<std::string> lines;
  simdjson::dom::parser parser;
  for (std::string line; std::getline(in, line);) {
    lines.emplace_back(std::string_view(parser.parse(line)));
  }
  return lines;
}

struct GoldenLine {
  std::string text;
  std::vector<int32_t> ids;          // encode(text, add_special=false)
  std::vector<int32_t> ids_special;  // encode(text, add_special=true)
  std::string decode;                // decode(ids)
  std::string decode_skip;           // decode(ids_special, skip_special=true)
};

inline std::vector<GoldenLine> load_golden(const std::string& name) {
  const std::vector<std::string> corpus = load_corpus();
  std::ifstream in(tokenizer_data("golden-" + name + ".jsonl"));
  std::string line;
  std::getline(in, line);
  simdjson::dom::parser header_parser, parser;
  simdjson::dom::element header = header_parser.parse(line);
  const std::vector<int32_t> prefix = to_ids(header["prefix"]);
  const std::vector<int32_t> suffix = to_ids(header["suffix"]);
  int64_t stride = 1;
  if (header["stride"].get(stride) != simdjson::SUCCESS) stride = 1;
  std::vector<GoldenLine> out;
  for (size_t i = 0; std::getline(in, line); ++i) {
    simdjson::dom::element rec = parser.parse(line);
    GoldenLine g;
    std::string_view text;  // a record may carry its own text instead of a corpus line
    g.text = rec["text"].get(text) == simdjson::SUCCESS ? std::string(text) : corpus.at(i * stride);
    g.ids = to_ids(rec["ids"]);
    simdjson::dom::array arr;
    if (rec["ids_special"].get(arr) == simdjson::SUCCESS) {
      g.ids_special = to_ids(arr);
    } else {
      g.ids_special = prefix;
      g.ids_special.insert(g.ids_special.end(), g.ids.begin(), g.ids.end());
      g.ids_special.insert(g.ids_special.end(), suffix.begin(), suffix.end());
    }
    std::string_view s;
    g.decode = rec["decode"].get(s) == simdjson::SUCCESS ? std::string(s) : g.text;
    g.decode_skip = rec["decode_skip"].get(s) == simdjson::SUCCESS ? std::string(s) : g.decode;
    out.push_back(std::move(g));
  }
  return out;
}

inline std::string show_ids(const std::vector<int32_t>& ids) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < ids.size(); ++i) os << (i ? "," : "") << ids[i];
  os << "]";
  return os.str();
}

inline std::string show_text(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20) out += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    else out += static_cast<char>(c);
  }
  if (out.size() > 200) out = out.substr(0, 200) + "...";
  return out + "\"";
}

// Mismatch counters of one golden run; the first few are printed.
struct GoldenReport {
  size_t lines = 0, encode_bad = 0, encode_special_bad = 0, decode_bad = 0, decode_skip_bad = 0,
         stream_bad = 0;
  int printed = 0;

  void note(const char* what, size_t line, const std::string& text, const std::string& got,
            const std::string& want) {
    if (printed++ >= 6) return;
    ADD_FAILURE() << what << " mismatch on corpus line " << line << " " << show_text(text) << "\n  got:  "
                  << got << "\n  want: " << want;
  }
};

// Streams ids through an IncrementalDecoder and returns the concatenation.
inline std::string stream_decode(const std::shared_ptr<const Tokenizer>& tok, const std::vector<int32_t>& ids,
                                 bool skip_special) {
  IncrementalDecoder dec(tok, skip_special);
  std::string out;
  for (int32_t id : ids) dec.push(id, out);
  return out + dec.finish();
}

// Compares encode/decode/streaming of tok with the HF goldens of `name`.
inline GoldenReport check_golden(const std::shared_ptr<const Tokenizer>& tok, const std::string& name) {
  GoldenReport r;
  const std::vector<GoldenLine> golden = load_golden(name);
  for (size_t i = 0; i < golden.size(); ++i) {
    const GoldenLine& g = golden[i];
    ++r.lines;
    const std::vector<int32_t> ids = tok->encode(g.text, false);
    if (ids != g.ids) ++r.encode_bad, r.note("encode", i, g.text, show_ids(ids), show_ids(g.ids));
    const std::vector<int32_t> ids_special = tok->encode(g.text, true);
    if (ids_special != g.ids_special) {
      ++r.encode_special_bad;
      r.note("encode(add_special)", i, g.text, show_ids(ids_special), show_ids(g.ids_special));
    }
    const std::string dec = tok->decode(g.ids);
    if (dec != g.decode) ++r.decode_bad, r.note("decode", i, g.text, show_text(dec), show_text(g.decode));
    const std::string dec_skip = tok->decode(g.ids_special, true);
    if (dec_skip != g.decode_skip) {
      ++r.decode_skip_bad;
      r.note("decode(skip_special)", i, g.text, show_text(dec_skip), show_text(g.decode_skip));
    }
    const std::string streamed = stream_decode(tok, g.ids, false);
    const std::string streamed_skip = stream_decode(tok, g.ids_special, true);
    if (streamed != g.decode || streamed_skip != g.decode_skip) {
      ++r.stream_bad;
      r.note("incremental decode", i, g.text, show_text(streamed) + " / " + show_text(streamed_skip),
             show_text(g.decode) + " / " + show_text(g.decode_skip));
    }
  }
  return r;
}

inline void expect_clean(const GoldenReport& r, const std::string& name) {
  EXPECT_GT(r.lines, 0u) << name << ": no golden lines";
  EXPECT_EQ(r.encode_bad, 0u) << name << ": " << r.encode_bad << " of " << r.lines << " lines encode differently";
  EXPECT_EQ(r.encode_special_bad, 0u) << name << ": encode(add_special) mismatches";
  EXPECT_EQ(r.decode_bad, 0u) << name << ": decode mismatches";
  EXPECT_EQ(r.decode_skip_bad, 0u) << name << ": decode(skip_special) mismatches";
  EXPECT_EQ(r.stream_bad, 0u) << name << ": incremental decode mismatches";
}

}  // namespace pagoda::model::test
