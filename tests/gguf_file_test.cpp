// GgufFile: valid v2/v3 files from an in-test writer (every value type, nested
// arrays, tensors of every supported type, custom alignment), broken files
// (each must give an Error naming the path, never a crash), and the real
// model against the tensor table recorded by the `gguf` Python package.
#include "model/gguf_file.hpp"

#include <simdjson.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "formats_test_util.hpp"
#include "model/mapped_file.hpp"

namespace pagoda::model {
namespace {

using test::Bytes;
using test::GgufTensorSpec;
using test::GgufWriter;

std::vector<uint8_t> filled(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

// A valid file with every metadata type and tensors of each supported type.
GgufWriter full_writer(uint32_t version, uint64_t alignment) {
  GgufWriter w;
  w.version = version;
  w.alignment = alignment;
  w.kv("k.u8", test::kU8, Bytes().u8(200)).kv("k.i8", test::kI8, Bytes().u8(0x80));
  w.kv("k.u16", test::kU16, Bytes().u16(65535)).kv("k.i16", test::kI16, Bytes().u16(0xFFFE));
  w.kv_u32("k.u32", 4000000000u).kv("k.i32", test::kI32, Bytes().u32(0xFFFFFFF9u));
  w.kv_f32("k.f32", 0.25f).kv_bool("k.bool", true).kv_str("k.str", "h\"i\n\xff");
  w.kv("k.u64", test::kU64, Bytes().u64(UINT64_MAX)).kv("k.i64", test::kI64, Bytes().u64(-5));
  w.kv("k.f64", test::kF64, Bytes().f64(-1.5e300));
  w.kv("k.arr_u32", test::kArr, Bytes().u32(test::kU32).u64(3).u32(1).u32(2).u32(3));
  w.kv("k.arr_f32", test::kArr, Bytes().u32(test::kF32).u64(2).f32(0.5f).f32(-2.0f));
  w.kv_str_array("k.arr_str", {"a", "", "ccc"});
  // [[1, 2], []] as an array of arrays of int16.
  w.kv("k.nested", test::kArr,
       Bytes().u32(test::kArr).u64(2).u32(test::kI16).u64(2).u16(1).u16(2).u32(test::kI16).u64(0));
  if (alignment != 32) w.kv_u32("general.alignment", static_cast<uint32_t>(alignment));
  w.tensor(test::spec("t.f32", {4, 3}, 0, filled(48, 1)));
  w.tensor(test::spec("t.f16", {8}, 1, filled(16, 2)));
  w.tensor(test::spec("t.q4_0", {64, 2}, 2, filled(18 * 4, 3)));
  w.tensor(test::spec("t.q4_1", {32}, 3, filled(20, 4)));
  w.tensor(test::spec("t.q8_0", {32, 1, 1, 2}, 8, filled(34 * 2, 5)));
  w.tensor(test::spec("t.bf16", {2, 2}, 30, filled(8, 6)));
  w.tensor(test::spec("t.q4_k", {256}, 12, filled(144, 7)));  // known by size only
  w.tensor(test::spec("t.q4_0b", {32, 3}, 2, filled(18 * 3, 8)));
  w.tensor(test::spec("t.q4_1b", {96, 2}, 3, filled(20 * 6, 9)));
  w.tensor(test::spec("t.q8_0b", {32, 5}, 8, filled(34 * 5, 10)));
  w.tensor(test::spec("t.f16b", {3, 3, 3}, 1, filled(54, 11)));
  return w;
}

std::string write(const std::string& name, const GgufWriter& w) {
  return test::write_file(name, w.build());
}

// Opens a file that must be rejected; returns the message (checked to name the path).
std::string open_error(const std::string& path) {
  auto g = GgufFile::open(path);
  EXPECT_FALSE(g.ok()) << path << " opened but should not";
  if (g.ok()) return "";
  EXPECT_NE(g.error().message.find(path), std::string::npos) << g.error().message;
  return g.error().message;
}

std::string open_error(const std::string& name, const GgufWriter& w) {
  return open_error(write(name, w));
}

void check_full_file(const GgufFile& g, uint64_t alignment) {
  EXPECT_EQ(g.alignment(), alignment);
  EXPECT_EQ(g.find("k.u8")->u, 200u);
  EXPECT_EQ(g.find("k.i8")->i, -128);
  EXPECT_EQ(*g.get_int("k.u16"), 65535);
  EXPECT_EQ(*g.get_int("k.i16"), -2);
  EXPECT_EQ(*g.get_int("k.u32"), 4000000000LL);
  EXPECT_EQ(*g.get_int("k.i32"), -7);
  EXPECT_EQ(*g.get_float("k.f32"), 0.25);
  EXPECT_EQ(*g.get_float("k.i32"), -7.0);
  EXPECT_TRUE(*g.get_bool("k.bool"));
  EXPECT_EQ(*g.get_string("k.str"), "h\"i\n\xff");
  EXPECT_EQ(g.find("k.u64")->u, UINT64_MAX);
  EXPECT_FALSE(g.get_int("k.u64").ok());  // does not fit int64
  EXPECT_EQ(*g.get_int("k.i64"), -5);
  EXPECT_EQ(*g.get_float("k.f64"), -1.5e300);
  EXPECT_EQ(*g.get_int_array("k.arr_u32"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(*g.get_float_array("k.arr_f32"), (std::vector<float>{0.5f, -2.0f}));
  EXPECT_EQ(*g.get_string_array("k.arr_str"), (std::vector<std::string>{"a", "", "ccc"}));
  const GgufValue* nested = g.find("k.nested");
  ASSERT_EQ(nested->array.size(), 2u);
  EXPECT_EQ(nested->array_type, GgufValueType::kArray);
  EXPECT_EQ(nested->array[0].array_type, GgufValueType::kInt16);
  EXPECT_EQ(nested->array[0].array[1].i, 2);
  EXPECT_TRUE(nested->array[1].array.empty());
  EXPECT_EQ(g.metadata().front().first, "k.u8");  // file order

  const std::vector<std::tuple<std::string, uint32_t, uint64_t, uint64_t>> want = {
      {"t.f32", 0, 12, 48},  {"t.f16", 1, 8, 16},  {"t.q4_0", 2, 128, 72},  {"t.q4_1", 3, 32, 20},
      {"t.q8_0", 8, 64, 68}, {"t.bf16", 30, 4, 8}, {"t.q4_k", 12, 256, 144},
      {"t.q4_0b", 2, 96, 54}, {"t.q4_1b", 3, 192, 120}, {"t.q8_0b", 8, 160, 170},
      {"t.f16b", 1, 27, 54}};
  ASSERT_EQ(g.tensors().size(), want.size());
  uint8_t seed = 1;
  for (const auto& [name, type, n, bytes] : want) {
    const GgufTensorInfo* t = g.find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->raw_type, type);
    EXPECT_EQ(t->num_elements(), n);
    EXPECT_EQ(t->nbytes, bytes);
    EXPECT_EQ(t->offset % alignment, 0u);
    EXPECT_GE(t->offset, g.data_offset());
    EXPECT_EQ(std::vector<uint8_t>(g.tensor_data(*t), g.tensor_data(*t) + t->nbytes),
              filled(bytes, seed++))
        << name;
  }
  EXPECT_EQ(g.find_tensor("t.q8_0")->dims, (std::vector<uint64_t>{32, 1, 1, 2}));
  EXPECT_EQ(g.find_tensor("missing"), nullptr);
  EXPECT_EQ(g.find("missing"), nullptr);
}

TEST(MappedFile, MapsEmptyAndNonEmptyFilesAndMoves) {
  auto empty = MappedFile::open(test::write_file("empty.bin", std::vector<uint8_t>{}));
  ASSERT_TRUE(empty.ok()) << empty.error().message;
  EXPECT_EQ(empty->size(), 0u);
  EXPECT_TRUE(empty->empty());
  EXPECT_NE(empty->data(), nullptr);
  const std::string path = test::write_file("three.bin", std::vector<uint8_t>{7, 8, 9});
  auto f = MappedFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->path(), path);
  ASSERT_EQ(f->size(), 3u);
  const uint8_t* data = f->data();
  EXPECT_EQ(data[2], 9);
  MappedFile moved = std::move(*f);
  EXPECT_EQ(moved.data(), data);
  EXPECT_EQ(f->size(), 0u);  // moved-from is empty
  MappedFile assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.data()[0], 7);
  auto missing = MappedFile::open(test::temp_dir() + "/missing.bin");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("missing.bin: cannot open"), std::string::npos);
  EXPECT_NE(MappedFile::open(test::temp_dir()).error().message.find("not a regular file"),
            std::string::npos);
}

// This process's resident kB of the mapping that starts at `at` (/proc/self/smaps); -1 if absent.
long resident_kb(const void* at) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t want = reinterpret_cast<uintptr_t>(at);
  bool in = false;
  for (std::string line; std::getline(smaps, line);) {
    const size_t dash = line.find('-');
    if (dash != std::string::npos && dash > 0 && line.find(' ') > dash &&
        std::isxdigit(static_cast<unsigned char>(line[0]))) {
      in = std::stoull(line.substr(0, dash), nullptr, 16) == want;
    } else if (in && line.rfind("Rss:", 0) == 0) {
      return std::stol(line.substr(4));
    }
  }
  return -1;
}

// release_resident drops the pages read so far from this process's resident
// set (the loader's way of not holding a packed weight twice), and the bytes
// read the same afterwards (they fault back in from the file).
TEST(MappedFile, ReleaseResidentDropsPagesAndKeepsContents) {
  std::vector<uint8_t> bytes(size_t{8} << 20);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 131 + (i >> 12));
  auto f = MappedFile::open(test::write_file("resident.bin", bytes));
  ASSERT_TRUE(f.ok()) << f.error().message;
  uint64_t sum = 0;
  for (size_t i = 0; i < bytes.size(); i += 4096) sum += f->data()[i];  // touch every page
  ASSERT_GE(resident_kb(f->data()), 8 * 1024 - 64) << "sum " << sum;
  f->release_resident();
  EXPECT_LE(resident_kb(f->data()), 64);
  EXPECT_EQ(std::memcmp(f->data(), bytes.data(), bytes.size()), 0);
}

TEST(GgufFile, ReadsEveryValueTypeV3) {
  const std::string path = write("full_v3.gguf", full_writer(3, 32));
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(g->path(), path);
  check_full_file(*g, 32);
}

TEST(GgufFile, ReadsV2WithCustomAlignment) {
  auto g = GgufFile::open(write("full_v2.gguf", full_writer(2, 64)));
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->version(), 2u);
  check_full_file(*g, 64);
}

TEST(GgufFile, MoveKeepsTensorPointers) {
  auto g = GgufFile::open(write("move.gguf", full_writer(3, 32)));
  ASSERT_TRUE(g.ok());
  const uint8_t* before = g->tensor_data(*g->find_tensor("t.f16"));
  GgufFile moved = std::move(*g);
  EXPECT_EQ(moved.tensor_data(*moved.find_tensor("t.f16")), before);
}

TEST(GgufFile, GetterErrorsNameKeyAndPath) {
  const std::string path = write("getters.gguf", full_writer(3, 32));
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok());
  for (const auto& e :
       {g->get_string("k.u8").error(), g->get_int("nope").error(), g->get_bool("k.str").error(),
        g->get_float("k.str").error(), g->get_string_array("k.arr_u32").error(),
        g->get_int_array("k.arr_str").error(), g->get_float_array("k.u8").error()}) {
    EXPECT_NE(e.message.find(path), std::string::npos) << e.message;
  }
  EXPECT_NE(g->get_int("nope").error().message.find("'nope' is missing"), std::string::npos);
  EXPECT_NE(g->get_string("k.u8").error().message.find("'k.u8' has type uint8"), std::string::npos);
}

TEST(GgufFile, EveryTruncationIsAnError) {
  GgufWriter w;
  w.kv_str("general.architecture", "llama").kv_str_array("a", {"x", "yy"}).kv_f32("f", 1.0f);
  w.tensor(test::spec("w", {32}, 8, filled(34, 9))).tensor(test::spec("v", {2}, 0, filled(8, 3)));
  const std::vector<uint8_t> full = w.build();
  ASSERT_TRUE(GgufFile::open(test::write_file("whole.gguf", full)).ok());
  for (size_t n = 0; n < full.size(); ++n) {
    const std::string path =
        test::write_file("cut.gguf", std::vector<uint8_t>(full.begin(), full.begin() + n));
    auto g = GgufFile::open(path);
    ASSERT_FALSE(g.ok()) << "prefix of " << n << " bytes opened";
    ASSERT_NE(g.error().message.find(path), std::string::npos) << g.error().message;
  }
}

TEST(GgufFile, RejectsBadHeaders) {
  GgufWriter w = full_writer(3, 32);
  w.magic = "GGML";
  EXPECT_NE(open_error("magic.gguf", w).find("bad magic"), std::string::npos);
  w = full_writer(1, 32);
  EXPECT_NE(open_error("v1.gguf", w).find("version 1 is not supported"), std::string::npos);
  w = full_writer(99, 32);
  EXPECT_NE(open_error("v99.gguf", w).find("version 99"), std::string::npos);
  w = full_writer(0x03000000u, 32);
  EXPECT_NE(open_error("be.gguf", w).find("big-endian"), std::string::npos);
  w = full_writer(3, 32);
  w.kv_count_override = uint64_t{1} << 40;
  EXPECT_NE(open_error("kvcount.gguf", w).find("metadata count"), std::string::npos);
  w = full_writer(3, 32);
  w.kv_count_override = 100;  // plausible but more than present
  open_error("kvcount2.gguf", w);
  w = full_writer(3, 32);
  w.tensor_count_override = UINT64_MAX;
  EXPECT_NE(open_error("tcount.gguf", w).find("tensor count"), std::string::npos);
  EXPECT_NE(open_error(test::write_file("empty.gguf", std::vector<uint8_t>{})).find("bad magic"),
            std::string::npos);
  open_error(test::temp_dir());                   // a directory
  open_error(test::temp_dir() + "/absent.gguf");  // missing
}

TEST(GgufFile, RejectsBadMetadata) {
  GgufWriter w;
  w.kv("s", test::kStr, Bytes().u64(uint64_t{1} << 60));
  EXPECT_NE(open_error("strlen.gguf", w).find("string length"), std::string::npos);
  w = GgufWriter();
  w.kv("a", test::kArr, Bytes().u32(test::kU64).u64(uint64_t{1} << 61));
  EXPECT_NE(open_error("arrlen.gguf", w).find("array length"), std::string::npos);
  w = GgufWriter();
  w.kv("a", test::kArr, Bytes().u32(test::kStr).u64(1000).str("x"));
  open_error("arrlen2.gguf", w);
  w = GgufWriter();
  w.kv("t", 13, Bytes().u32(0));
  EXPECT_NE(open_error("vtype.gguf", w).find("unknown value type 13"), std::string::npos);
  w = GgufWriter();
  w.kv("t", test::kArr, Bytes().u32(77).u64(0));
  EXPECT_NE(open_error("etype.gguf", w).find("unknown array element type 77"), std::string::npos);
  w = GgufWriter();
  w.kv_u32("dup", 1).kv_u32("x", 2).kv_u32("dup", 3);
  EXPECT_NE(open_error("dupkey.gguf", w).find("duplicate metadata key 'dup'"), std::string::npos);
  Bytes deep;  // arrays nested 100 deep
  for (int i = 0; i < 100; ++i) deep.u32(test::kArr).u64(1);
  deep.u32(test::kU8).u64(0);
  w = GgufWriter();
  w.kv("deep", test::kArr, deep);
  EXPECT_NE(open_error("deep.gguf", w).find("nested deeper"), std::string::npos);
  for (uint32_t bad : {0u, 3u, 48u}) {
    w = full_writer(3, 32);
    w.kv_u32("general.alignment", bad);
    EXPECT_NE(open_error("align.gguf", w).find("general.alignment"), std::string::npos);
  }
  w = full_writer(3, 32);
  w.kv_str("general.alignment", "32");
  EXPECT_NE(open_error("align2.gguf", w).find("expected an integer"), std::string::npos);
}

GgufWriter one_tensor(GgufTensorSpec t) {
  GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.tensor(test::spec("ok", {32}, 0, filled(128, 1)));
  w.tensor(std::move(t));
  return w;
}

TEST(GgufFile, RejectsBadTensorInfos) {
  std::string e =
      open_error("past_end.gguf", one_tensor(test::spec("blk.0.attn_q.weight", {32}, 0, {}, 4096)));
  EXPECT_NE(e.find("tensor 'blk.0.attn_q.weight' data [offset 4096, 128 bytes] lies past the end"),
            std::string::npos)
      << e;
  e = open_error("huge_off.gguf", one_tensor(test::spec("t", {32}, 0, {}, UINT64_MAX - 31)));
  EXPECT_NE(e.find("lies past the end"), std::string::npos) << e;
  e = open_error("misaligned.gguf", one_tensor(test::spec("t", {1}, 0, {}, 132)));
  EXPECT_NE(e.find("tensor 't' data offset 132 is not a multiple of the alignment 32"),
            std::string::npos)
      << e;
  e = open_error("unknown_type.gguf", one_tensor(test::spec("t.x", {4}, 77, filled(16, 0))));
  EXPECT_NE(e.find("tensor 't.x' has unknown ggml type id 77"), std::string::npos) << e;
  e = open_error("ndims.gguf", one_tensor(test::spec("t", {1, 1, 1, 1, 1}, 0, filled(4, 0))));
  EXPECT_NE(e.find("5 dimensions"), std::string::npos) << e;
  e = open_error("ndims_huge.gguf",
                 one_tensor(test::spec("t", {1}, 0, filled(4, 0), std::nullopt, 0xFFFFFFFFu)));
  e = open_error("overflow.gguf",
                 one_tensor(test::spec("t", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, {})));
  EXPECT_NE(e.find("overflows"), std::string::npos) << e;
  e = open_error("bytes_overflow.gguf", one_tensor(test::spec("t", {uint64_t{1} << 62}, 0, {})));
  EXPECT_NE(e.find("overflows"), std::string::npos) << e;
  e = open_error("block.gguf", one_tensor(test::spec("t", {33}, 2, filled(18, 0))));
  EXPECT_NE(e.find("not a multiple of the Q4_0 block size 32"), std::string::npos) << e;
  e = open_error("dup_tensor.gguf", one_tensor(test::spec("ok", {32}, 0, filled(128, 1))));
  EXPECT_NE(e.find("duplicate tensor 'ok'"), std::string::npos) << e;
  GgufWriter w;  // the name length is hostile
  w.tensor_count_override = 1;
  Bytes b;
  b.u64(uint64_t{1} << 62).raw(std::vector<uint8_t>(40, 'x'));
  w.kv("k", test::kU8, Bytes().u8(1));
  std::vector<uint8_t> bytes = w.build();
  bytes.insert(bytes.end(), b.b.begin(), b.b.end());
  e = open_error(test::write_file("name_len.gguf", bytes));
  EXPECT_NE(e.find("name of tensor #0: string length 4611686018427387904"), std::string::npos) << e;
}

// Random byte flips of a valid file: any outcome is fine except a crash or an
// accepted file whose tensors lie outside it.
TEST(GgufFile, SurvivesRandomCorruption) {
  const std::vector<uint8_t> good = full_writer(3, 32).build();
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> bad = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      bad[rng() % bad.size()] = rng() % 3 == 0 ? 0xFF : static_cast<uint8_t>(rng());
    }
    auto g = GgufFile::open(test::write_file("fuzz.gguf", bad));
    if (!g.ok()) continue;
    for (const auto& t : g->tensors()) {
      ASSERT_LE(t.offset + t.nbytes, g->file_size());
    }
  }
}

TEST(GgufFile, RealModelMatchesGgufPythonPackage) {
  PAGODA_REQUIRE_REAL_MODEL(path);
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(g->alignment(), 32u);
  EXPECT_EQ(g->metadata().size(), 33u);
  EXPECT_EQ(*g->get_string("general.architecture"), "llama");
  EXPECT_EQ(g->get_string_array("tokenizer.ggml.tokens")->size(), 49152u);

  simdjson::dom::parser parser;
  simdjson::dom::element golden;
  const std::string golden_path =
      std::string(PAGODA_TEST_DATA_DIR) + "/formats/dequant_golden.json";
  ASSERT_EQ(parser.load(golden_path).get(golden), simdjson::SUCCESS) << golden_path;
  simdjson::dom::array tensors;
  ASSERT_EQ(golden["tensors"].get(tensors), simdjson::SUCCESS);
  ASSERT_EQ(g->tensors().size(), tensors.size());
  size_t i = 0;
  for (simdjson::dom::element t : tensors) {
    const GgufTensorInfo& mine = g->tensors()[i++];  // same order as the file
    std::string_view name;
    uint64_t type = 0, offset = 0, nbytes = 0;
    ASSERT_EQ(t["name"].get(name), simdjson::SUCCESS);
    ASSERT_EQ(t["type"].get(type), simdjson::SUCCESS);
    ASSERT_EQ(t["offset"].get(offset), simdjson::SUCCESS);
    ASSERT_EQ(t["nbytes"].get(nbytes), simdjson::SUCCESS);
    EXPECT_EQ(mine.name, name);
    EXPECT_EQ(mine.raw_type, type) << name;
    EXPECT_EQ(mine.offset, offset) << name;
    EXPECT_EQ(mine.nbytes, nbytes) << name;
    simdjson::dom::array dims_json;
    ASSERT_EQ(t["dims"].get(dims_json), simdjson::SUCCESS);
    std::vector<uint64_t> dims;
    for (simdjson::dom::element d : dims_json) {
      uint64_t v = 0;
      ASSERT_EQ(d.get(v), simdjson::SUCCESS);
      dims.push_back(v);
    }
    EXPECT_EQ(mine.dims, dims) << name;
  }
}

}  // namespace
}  // namespace pagoda::model
