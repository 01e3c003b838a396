// Broken model files: every way a GGUF file, a safetensors file or a
// config.json can be damaged gives a clear Error that names the file and the
// problem, at load (load_llama_weights on the CPU backend), never a crash or
// a hang; and `pagoda generate` / `pagoda serve` exit non-zero with that
// message. The files are built here from the tiny HF test model
// (tests/data/logits/tiny-llama: safetensors + config.json) and the GGUF
// writer of tests/tiny_gguf_writer.hpp, then damaged:
//  - GGUF: truncated at every section boundary (header fields, each
//    metadata key / type / value, each tensor info, the data section start,
//    each tensor's data) and one byte before each; wrong magic; huge tensor,
//    metadata, string and array counts; a data offset past the end;
//    overlapping tensors; an unsupported dtype; a wrong shape; a missing
//    tensor; NaN / Inf in F32 weights and in Q8_0 block scales; absurd or
//    out-of-range config metadata;
//  - safetensors: truncated header, offsets past the data section,
//    overlapping tensors, unsupported dtype, NaN weights;
//  - config.json: invalid JSON, missing and wrongly typed fields, absurd
//    sizes, sizes that disagree with the tensors, bad token ids.
// The GGUF section boundaries come from an independent walker written here
// (not the reader under test).
#include <gtest/gtest.h>
#include <simdjson.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "formats_test_util.hpp"
#include "gpu/backend.hpp"
#include "model/llama_weights.hpp"
#include "tiny_gguf_writer.hpp"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

const std::string kTinyDir = std::string(PAGODA_TEST_DATA_DIR) + "/logits/tiny-llama";

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

uint64_t get_le(const std::vector<uint8_t>& b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t(b[at + i]) << (8 * i);
  return v;
}

void put_le(std::vector<uint8_t>& b, size_t at, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b[at + i] = uint8_t(v >> (8 * i));
}

// Where each part of a GGUF file starts and ends, found independently of
// model/gguf_file (value types: scalars, strings, arrays of them).
struct GgufLayout {
  std::vector<size_t> boundaries;  // every section boundary, ascending
  std::map<std::string, size_t> value_at;    // metadata key -> its value's first byte
  std::map<std::string, size_t> offset_at;   // tensor -> its offset field
  std::map<std::string, uint64_t> data_at;   // tensor -> absolute data start
  std::map<std::string, uint64_t> data_len;  // tensor -> data bytes
  std::vector<std::string> tensor_order;
  size_t data_start = 0;
};

size_t scalar_size(uint32_t type) {
  static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  return sizes[type];
}

size_t skip_value(const std::vector<uint8_t>& b, size_t p, uint32_t type) {
  if (type == 8) return p + 8 + get_le(b, p, 8);
  if (type != 9) return p + scalar_size(type);
  const uint32_t et = uint32_t(get_le(b, p, 4));
  const uint64_t n = get_le(b, p + 4, 8);
  p += 12;
  for (uint64_t i = 0; i < n; ++i) p = skip_value(b, p, et);
  return p;
}

uint64_t tensor_bytes(uint32_t type, uint64_t n) {
  switch (type) {
    case 0: return n * 4;
    case 1: case 30: return n * 2;
    case 8: return n / 32 * 34;
    case 2: return n / 32 * 18;
    case 3: return n / 32 * 20;
    case 6: return n / 32 * 22;
  }
  return 0;
}

GgufLayout walk_gguf(const std::vector<uint8_t>& b) {
  GgufLayout L;
  const uint64_t n_tensors = get_le(b, 8, 8), n_kv = get_le(b, 16, 8);
  L.boundaries = {4, 8, 16, 24};
  size_t p = 24;
  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t klen = get_le(b, p, 8);
    const std::string key(reinterpret_cast<const char*>(&b[p + 8]), klen);
    p += 8 + klen;
    L.boundaries.push_back(p);
    const uint32_t type = uint32_t(get_le(b, p, 4));
    p += 4;
    L.boundaries.push_back(p);
    L.value_at[key] = p;
    p = skip_value(b, p, type);
    L.boundaries.push_back(p);
  }
  std::vector<std::pair<std::string, uint64_t>> rel;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const uint64_t nlen = get_le(b, p, 8);
    const std::string name(reinterpret_cast<const char*>(&b[p + 8]), nlen);
    p += 8 + nlen;
    const uint32_t nd = uint32_t(get_le(b, p, 4));
    p += 4;
    uint64_t n = 1;
    for (uint32_t d = 0; d < nd; ++d, p += 8) n *= get_le(b, p, 8);
    const uint32_t type = uint32_t(get_le(b, p, 4));
    p += 4;
    L.offset_at[name] = p;
    rel.emplace_back(name, get_le(b, p, 8));
    L.data_len[name] = tensor_bytes(type, n);
    p += 8;
    L.boundaries.push_back(p);
    L.tensor_order.push_back(name);
  }
  L.data_start = (p + 31) / 32 * 32;
  L.boundaries.push_back(L.data_start);
  for (const auto& [name, off] : rel) {
    L.data_at[name] = L.data_start + off;
    L.boundaries.push_back(L.data_start + off + L.data_len[name]);
  }
  std::sort(L.boundaries.begin(), L.boundaries.end());
  L.boundaries.erase(std::unique(L.boundaries.begin(), L.boundaries.end()), L.boundaries.end());
  return L;
}

// The loader's error for a model path (a failure when it loads).
std::string load_error(const std::string& path, model::WeightPrecision precision =
                                                    model::WeightPrecision::kQuantized) {
  static auto backend = gpu::make_backend(gpu::BackendKind::kCpu);
  EXPECT_TRUE(backend.ok());
  model::WeightLoadOptions opts;
  opts.precision = precision;
  auto w = model::load_llama_weights(path, **backend, opts);
  if (w.ok()) return "<loaded>";
  return w.error().message;
}

// The error names `file` and contains one of `problems`.
::testing::AssertionResult names(const std::string& error, const std::string& file,
                                 std::initializer_list<const char*> problems) {
  if (error.find(file) == std::string::npos) {
    return ::testing::AssertionFailure() << "error does not name " << file << ": " << error;
  }
  for (const char* p : problems) {
    if (error.find(p) != std::string::npos) return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "error names no expected problem: " << error;
}

// Like names(), but every one of `parts` must be in the error.
::testing::AssertionResult names_all(const std::string& error, const std::string& file,
                                     std::initializer_list<const char*> parts) {
  if (error.find(file) == std::string::npos) {
    return ::testing::AssertionFailure() << "error does not name " << file << ": " << error;
  }
  for (const char* p : parts) {
    if (error.find(p) == std::string::npos) {
      return ::testing::AssertionFailure() << "error lacks \"" << p << "\": " << error;
    }
  }
  return ::testing::AssertionSuccess();
}

class BrokenGguf : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    base_path_ = test::write_tiny_gguf(kTinyDir, "broken_base");
    base_ = read_bytes(base_path_);
    layout_ = walk_gguf(base_);
  }
  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) {
    return test::write_file(name + ".gguf", bytes);
  }
  static std::string base_path_;
  static std::vector<uint8_t> base_;
  static GgufLayout layout_;
};
std::string BrokenGguf::base_path_;
std::vector<uint8_t> BrokenGguf::base_;
GgufLayout BrokenGguf::layout_;

TEST_F(BrokenGguf, TheUndamagedFileLoads) {
  EXPECT_EQ(load_error(base_path_), "<loaded>");
  EXPECT_EQ(layout_.boundaries.back(), base_.size()) << "the walker reaches the end of the file";
  EXPECT_GT(layout_.tensor_order.size(), 10u);
}

TEST_F(BrokenGguf, TruncatedAtEverySectionBoundaryAndOneByteBefore) {
  size_t cases = 0;
  for (size_t b : layout_.boundaries) {
    for (size_t cut : {b, b - 1}) {
      if (cut >= base_.size()) continue;
      SCOPED_TRACE("truncated to " + std::to_string(cut) + " bytes");
      const std::string path = write("truncated", std::vector<uint8_t>(base_.begin(), base_.begin() + cut));
      EXPECT_TRUE(names(load_error(path), path,
                        {"truncated", "past the end", "exceeds the", "impossible for the", "bad magic"}));
      ++cases;
    }
  }
  EXPECT_GT(cases, 2 * layout_.tensor_order.size());
}

TEST_F(BrokenGguf, WrongMagicAndVersion) {
  auto b = base_;
  b[3] = 'X';
  std::string p = write("magic", b);
  EXPECT_TRUE(names(load_error(p), p, {"bad magic"}));
  b = base_;
  put_le(b, 4, 0x03000000u, 4);
  p = write("version", b);
  EXPECT_TRUE(names(load_error(p), p, {"unsupported GGUF version", "big-endian"}));
}

TEST_F(BrokenGguf, HugeCounts) {
  const std::pair<size_t, const char*> counts[] = {{8, "tensor count"}, {16, "metadata count"}};
  for (const auto& [at, what] : counts) {
    for (uint64_t huge : {uint64_t{1} << 40, ~uint64_t{0}}) {
      auto b = base_;
      put_le(b, at, huge, 8);
      const std::string p = write("count", b);
      EXPECT_TRUE(names(load_error(p), p, {what})) << huge;
    }
  }
  auto b = base_;
  put_le(b, 24, ~uint64_t{0} >> 1, 8);  // the first key's string length
  std::string p = write("strlen", b);
  EXPECT_TRUE(names(load_error(p), p, {"exceeds the"}));
  // An array whose count is far beyond the file.
  test::GgufWriter w;
  w.kv("tokenizer.ggml.tokens", test::kArr, test::Bytes().u32(test::kStr).u64(uint64_t{1} << 50));
  p = write("array", w.build());
  EXPECT_TRUE(names(load_error(p), p, {"array length"}));
}

TEST_F(BrokenGguf, DataOffsetPastTheEnd) {
  auto b = base_;
  const std::string& last = layout_.tensor_order.back();
  put_le(b, layout_.offset_at.at(last), uint64_t(base_.size()) / 32 * 32 + 32, 8);
  const std::string p = write("offset", b);
  EXPECT_TRUE(names(load_error(p), p, {"lies past the end of the file"}));
}

TEST_F(BrokenGguf, OverlappingTensors) {
  auto b = base_;
  const std::string& first = layout_.tensor_order.front();
  const std::string& second = layout_.tensor_order[1];
  // The second tensor's data starts inside the first's.
  put_le(b, layout_.offset_at.at(second), layout_.data_at.at(first) - layout_.data_start, 8);
  const std::string p = write("overlap", b);
  EXPECT_TRUE(names(load_error(p), p, {"overlap"}));
}

TEST_F(BrokenGguf, WrongDtypeShapeOrMissingTensor) {
  test::TinyGgufOptions o;
  o.bad_type = "blk.0.attn_q.weight";
  std::string p = test::write_tiny_gguf(kTinyDir, "bad_type", o);
  // The file, the tensor, the type, and the list of the supported types.
  EXPECT_TRUE(names_all(load_error(p), p,
                    {"blk.0.attn_q.weight", "has type I32", "not supported",
                     "supported types: F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, "
                     "Q5_K, Q6_K, IQ4_NL, IQ4_XS, BF16"}));
  o = {};
  o.bad_shape = "blk.1.ffn_down.weight";
  p = test::write_tiny_gguf(kTinyDir, "bad_shape", o);
  // The tensor and both shapes (the file's, the config's; HF order [out, in]).
  EXPECT_TRUE(names_all(load_error(p), p,
                    {"blk.1.ffn_down.weight", "has shape [95, 200]", "expected [96, 200]"}));
  o = {};
  o.drop = "output_norm.weight";
  p = test::write_tiny_gguf(kTinyDir, "missing", o);
  EXPECT_TRUE(names(load_error(p), p, {"is missing"}));
}

TEST_F(BrokenGguf, NanOrInfInWeights) {
  for (const char* tensor : {"blk.0.attn_k.weight", "output_norm.weight", "token_embd.weight"}) {
    for (uint32_t bits : {0x7FC00000u, 0x7F800000u, 0xFF800000u}) {
      auto b = base_;
      const uint64_t at = layout_.data_at.at(tensor) + layout_.data_len.at(tensor) / 2 / 4 * 4;
      put_le(b, at, bits, 4);
      const std::string p = write("nan", b);
      EXPECT_TRUE(names(load_error(p, model::WeightPrecision::kExact), p, {"non-finite"})) << tensor;
      EXPECT_NE(load_error(p).find(tensor), std::string::npos) << "the error names the tensor";
    }
  }
}

TEST_F(BrokenGguf, InfInAQ8_0BlockScale) {
  test::TinyGgufOptions o;
  o.q8_0 = true;
  const std::string good = test::write_tiny_gguf(kTinyDir, "q8", o);
  ASSERT_EQ(load_error(good), "<loaded>");
  auto b = read_bytes(good);
  const GgufLayout L = walk_gguf(b);
  put_le(b, L.data_at.at("blk.2.ffn_up.weight") + 34 * 3, 0x7C00, 2);  // block 3's fp16 scale
  const std::string p = write("q8_inf", b);
  EXPECT_TRUE(names(load_error(p), p, {"non-finite"}));
}

// The K-quants keep their fp16 scales elsewhere in the block (Q4_K: d and
// dmin at bytes 0 and 2; Q6_K: d at byte 208); the seeds of the gguf fuzz
// corpus hold such blocks in ffn_down.
TEST_F(BrokenGguf, InfInAKQuantBlockScale) {
  const std::string corpus = std::string(PAGODA_TEST_DATA_DIR) + "/../fuzz/corpus/gguf/";
  const std::pair<const char*, size_t> cases[] = {{"tiny_llama_q4_k.seed", 144 * 5 + 2},
                                                  {"tiny_llama_q6_k.seed", 210 * 5 + 208}};
  for (const auto& [seed, at] : cases) {
    auto b = read_bytes(corpus + seed);
    ASSERT_FALSE(b.empty()) << seed;
    const std::string good = write("kquant_good", b);
    ASSERT_EQ(load_error(good), "<loaded>") << seed;
    const GgufLayout L = walk_gguf(b);
    put_le(b, L.data_at.at("blk.0.ffn_down.weight") + at, 0x7C00, 2);  // block 5's scale: +inf
    const std::string p = write("kquant_inf", b);
    for (auto precision : {model::WeightPrecision::kQuantized, model::WeightPrecision::kExact}) {
      const std::string e = load_error(p, precision);
      EXPECT_TRUE(names_all(e, p, {"blk.0.ffn_down.weight", "non-finite", "element 1280"})) << seed;
    }
  }
}

TEST_F(BrokenGguf, AbsurdConfigMetadata) {
  const std::pair<const char*, uint32_t> cases[] = {
      {"llama.block_count", 0},           {"llama.block_count", 5000},
      {"llama.embedding_length", 0xFFFFFFFFu}, {"llama.attention.head_count", 7},
      {"llama.vocab_size", 0}};
  for (const auto& [key, value] : cases) {
    auto b = base_;
    put_le(b, layout_.value_at.at(key), value, 4);
    const std::string p = write("config", b);
    EXPECT_TRUE(names(load_error(p), p,
                      {"must be positive", "implausibly large", "out of range", "does not divide",
                       "must be even and in (0, head_dim"}))
        << key << " = " << value;
  }
  {  // a context length beyond the bound is clamped with a note, not refused
    auto b = base_;
    put_le(b, layout_.value_at.at("llama.context_length"), 0x7FFFFFFFu, 4);
    EXPECT_EQ(load_error(write("config_ctx", b)), "<loaded>");
  }
  auto b = base_;
  const size_t eps = layout_.value_at.at("llama.attention.layer_norm_rms_epsilon");
  put_le(b, eps, 0x7FC00000u, 4);  // NaN
  const std::string p = write("eps", b);
  EXPECT_TRUE(names(load_error(p), p, {"rms_norm_eps must be positive"}));
}

// ---- HF directories: config.json and safetensors ---------------------------------

struct StEntry {
  std::string name, dtype;
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;
};

struct StFile {
  std::vector<StEntry> entries;
  std::vector<uint8_t> data;
};

StFile read_st(const std::string& path) {
  const std::vector<uint8_t> b = read_bytes(path);
  const uint64_t n = get_le(b, 0, 8);
  simdjson::dom::parser parser;
  simdjson::dom::object root = parser.parse(reinterpret_cast<const char*>(&b[8]), n).get_object();
  StFile f;
  for (auto [key, value] : root) {
    if (key == "__metadata__") continue;
    StEntry e;
    e.name = std::string(key);
    e.dtype = std::string(std::string_view(value["dtype"]));
    for (int64_t d : value["shape"].get_array()) e.shape.push_back(uint64_t(d));
    simdjson::dom::array off = value["data_offsets"];
    e.begin = uint64_t(int64_t(off.at(0)));
    e.end = uint64_t(int64_t(off.at(1)));
    f.entries.push_back(e);
  }
  f.data.assign(b.begin() + 8 + n, b.end());
  return f;
}

std::vector<uint8_t> st_bytes(const StFile& f) {
  std::string h = "{";
  for (const StEntry& e : f.entries) {
    if (h.size() > 1) h += ",";
    h += "\"" + e.name + "\":{\"dtype\":\"" + e.dtype + "\",\"shape\":[";
    for (size_t i = 0; i < e.shape.size(); ++i) h += (i ? "," : "") + std::to_string(e.shape[i]);
    h += "],\"data_offsets\":[" + std::to_string(e.begin) + "," + std::to_string(e.end) + "]}";
  }
  h += "}";
  test::Bytes out;
  out.u64(h.size()).raw(h).raw(f.data);
  return out.b;
}

class BrokenHfDir : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::ifstream f(kTinyDir + "/config.json");
    std::stringstream ss;
    ss << f.rdbuf();
    config_ = ss.str();
    st_ = read_st(kTinyDir + "/model.safetensors");
  }
  // A model directory `name` with this config.json text and safetensors file.
  static std::string make_dir(const std::string& name, const std::string& config,
                              const std::vector<uint8_t>& st) {
    const std::string dir = test::temp_dir() + "/" + name;
    fs::create_directories(dir);
    test::write_file(name + "/config.json", config);
    test::write_file(name + "/model.safetensors", st);
    return dir;
  }
  // config.json with `from` replaced by `to` (which must occur once).
  static std::string config_with(const std::string& from, const std::string& to) {
    const size_t at = config_.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    std::string c = config_;
    if (at != std::string::npos) c.replace(at, from.size(), to);
    return c;
  }
  static std::string config_;
  static StFile st_;
};
std::string BrokenHfDir::config_;
StFile BrokenHfDir::st_;

TEST_F(BrokenHfDir, TheUndamagedDirectoryLoads) {
  EXPECT_EQ(load_error(make_dir("hf_good", config_, st_bytes(st_))), "<loaded>");
}

TEST_F(BrokenHfDir, BrokenConfigJson) {
  const std::pair<std::pair<const char*, const char*>, const char*> cases[] = {
      {{"\"hidden_size\": 96", "\"hidden_sise\": 96"}, "\"hidden_size\" is missing"},
      {{"\"hidden_size\": 96", "\"hidden_size\": \"96\""}, "must be an integer"},
      {{"\"num_hidden_layers\": 3", "\"num_hidden_layers\": 100000"}, "implausibly large"},
      {{"\"vocab_size\": 517", "\"vocab_size\": -5"}, "must be positive"},
      {{"\"vocab_size\": 517", "\"vocab_size\": 99999999999"}, "out of range"},
      {{"\"num_attention_heads\": 6", "\"num_attention_heads\": 7"}, "does not divide"},
      {{"\"rms_norm_eps\": 1e-06", "\"rms_norm_eps\": 0"}, "rms_norm_eps must be positive"},
      {{"\"model_type\": \"llama\"", "\"model_type\": \"gpt2\""}, "unsupported model_type"},
      {{"\"rope_type\": \"llama3\"", "\"rope_type\": \"yarn\""}, "unsupported rope_scaling type"},
      {{"\"eos_token_id\": 2", "\"eos_token_id\": 9999"}, "outside the vocabulary"},
      {{"\"max_position_embeddings\": 256", "\"max_position_embeddings\": 256.5"},
       "must be a non-negative integer"},
      {{"\"intermediate_size\": 200", "\"intermediate_size\": 208"}, "has shape"},
      {{"{", "{{"}, "invalid JSON"},
  };
  int i = 0;
  for (const auto& [edit, problem] : cases) {
    const std::string dir = make_dir("hf_cfg" + std::to_string(i++), config_with(edit.first, edit.second),
                                     st_bytes(st_));
    EXPECT_TRUE(names(load_error(dir), dir, {problem})) << edit.second;
  }
  // A huge context length (here a float beyond 64 bits) is clamped with a note.
  const std::string big = make_dir("hf_cfg_bigctx",
                                   config_with("\"max_position_embeddings\": 256",
                                               "\"max_position_embeddings\": 1e300"),
                                   st_bytes(st_));
  EXPECT_EQ(load_error(big), "<loaded>");
}

TEST_F(BrokenHfDir, BrokenSafetensors) {
  const std::string file = "/model.safetensors";
  std::vector<uint8_t> good = st_bytes(st_);
  // Header cut short, and a file shorter than its 8-byte length.
  std::string dir = make_dir("st_trunc", config_, std::vector<uint8_t>(good.begin(), good.begin() + 100));
  EXPECT_TRUE(names(load_error(dir), dir + file, {"header length", "invalid JSON"}));
  dir = make_dir("st_tiny", config_, std::vector<uint8_t>(good.begin(), good.begin() + 5));
  EXPECT_TRUE(names(load_error(dir), dir + file, {"too small"}));
  // Data cut short: the last tensor's offsets lie past the data section.
  StFile f = st_;
  ASSERT_GE(f.data.size(), 4u);
  f.data.erase(f.data.end() - 4, f.data.end());  // (resize(n - 4) trips GCC 12 -Wstringop-overflow)
  dir = make_dir("st_short", config_, st_bytes(f));
  EXPECT_TRUE(names(load_error(dir), dir + file, {"outside the data section"}));
  // Overlapping tensors: the second entry's bytes start inside the first's.
  f = st_;
  ASSERT_GE(f.entries.size(), 2u);
  std::sort(f.entries.begin(), f.entries.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
  const uint64_t len = f.entries[1].end - f.entries[1].begin;
  f.entries[1].begin = f.entries[0].begin + 4;
  f.entries[1].end = f.entries[1].begin + len;
  dir = make_dir("st_overlap", config_, st_bytes(f));
  EXPECT_TRUE(names(load_error(dir), dir + file, {"overlap"}));
  // Unsupported dtype, and a dtype whose size disagrees with the bytes.
  f = st_;
  f.entries[0].dtype = "I32";
  dir = make_dir("st_dtype", config_, st_bytes(f));
  EXPECT_TRUE(names(load_error(dir), dir + file, {"unsupported dtype 'I32'"}));
  f = st_;
  f.entries[0].dtype = "F16";
  dir = make_dir("st_size", config_, st_bytes(f));
  EXPECT_TRUE(names(load_error(dir), dir + file, {"but its F16 shape needs"}));
  // NaN in a weight.
  f = st_;
  const StEntry& e = f.entries[f.entries.size() / 2];
  put_le(f.data, e.begin + 4, 0x7FC00000u, 4);
  dir = make_dir("st_nan", config_, st_bytes(f));
  EXPECT_TRUE(names(load_error(dir), dir, {"non-finite"}));
  EXPECT_NE(load_error(dir).find(e.name), std::string::npos) << "the error names the tensor";
}

// ---- the command line: exit codes ----------------------------------------------

// The `pagoda` binary beside the test executables' folder ("" when absent).
std::string pagoda_bin() {
  if (const char* env = std::getenv("PAGODA_BIN"); env && *env) return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  const fs::path bin = self.parent_path().parent_path() / "pagoda";
  return fs::exists(bin) ? bin.string() : "";
}

struct CliRun {
  int exit_code = -1;  // -1: killed by a signal (or popen failed)
  std::string output;  // stdout + stderr
};

CliRun run(const std::string& cmd) {
  CliRun r;
  std::FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

class BrokenModelCli : public BrokenHfDir {
 protected:
  void SetUp() override {
    bin_ = pagoda_bin();
    if (bin_.empty()) GTEST_SKIP() << "no pagoda binary beside the tests (set PAGODA_BIN)";
  }
  // `timeout` turns a hang into exit code 124 (a failure below).
  CliRun generate(const std::string& model) {
    return run("timeout 300 " + bin_ + " generate '" + model +
               "' --prompt hello --max-tokens 2 --backend cpu --max-num-seqs 2 --kv-cache-memory 4000000");
  }
  std::string bin_;
};

TEST_F(BrokenModelCli, GenerateRunsTheUndamagedModel) {
  const CliRun r = generate(make_dir("cli_good", config_, st_bytes(st_)));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(BrokenModelCli, GenerateExitsNonZeroNamingTheFileAndProblem) {
  StFile f = st_;
  put_le(f.data, f.entries[0].begin, 0x7F800000u, 4);
  const std::pair<std::string, const char*> cases[] = {
      {make_dir("cli_nan", config_, st_bytes(f)), "non-finite"},
      {make_dir("cli_cfg", config_with("\"num_hidden_layers\": 3", "\"num_hidden_layers\": 0"),
                st_bytes(st_)), "must be positive"},
  };
  for (const auto& [dir, problem] : cases) {
    const CliRun r = generate(dir);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.exit_code, -1) << "killed by a signal: " << r.output;
    EXPECT_NE(r.exit_code, 124) << "hung: " << r.output;
    EXPECT_TRUE(names(r.output, dir, {problem}));
  }
  const std::vector<uint8_t> gguf = read_bytes(test::write_tiny_gguf(kTinyDir, "cli_base"));
  const std::string cut = test::write_file("cli_cut.gguf", std::vector<uint8_t>(gguf.begin(), gguf.begin() + gguf.size() / 2));
  const CliRun r = generate(cut);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, -1) << r.output;
  EXPECT_NE(r.exit_code, 124) << r.output;
  EXPECT_TRUE(names(r.output, cut, {"past the end"}));
}

TEST_F(BrokenModelCli, ServeExitsNonZeroInsteadOfServingABrokenModel) {
  const std::string dir = make_dir("serve_cfg", config_with("\"vocab_size\": 517", "\"vocab_size\": 0"),
                                   st_bytes(st_));
  const CliRun r = run("timeout 300 " + bin_ + " serve '" + dir + "' --port 0 --backend cpu");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, -1) << r.output;
  EXPECT_NE(r.exit_code, 124) << "hung: " << r.output;
  EXPECT_TRUE(names(r.output, dir, {"vocab_size must be positive"}));
}

}  // namespace
}  // namespace pagoda
