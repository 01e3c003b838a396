// SafetensorsFile / SafetensorsModel: valid files and directories built in the
// test, and broken ones (each must give an Error naming the file).
#include "model/safetensors_file.hpp"

#include <cmath>
#include <filesystem>
#include <random>

#include "formats_test_util.hpp"

namespace pagoda::model {
namespace {

using test::Bytes;

std::vector<uint8_t> st_file(const std::string& header, const std::vector<uint8_t>& data) {
  return Bytes().u64(header.size()).raw(header).raw(data).b;
}

// Three tensors: a [2, 3] F32, b [4] F16, c [2, 2] BF16, plus __metadata__.
std::vector<uint8_t> good_file() {
  Bytes data;
  for (float f : {1.0f, -2.5f, 3.0f, 0.125f, 1e-3f, -0.0f}) data.f32(f);  // 24 bytes
  data.u16(0x3C00).u16(0xC100).u16(0x0001).u16(0x7C00);                   // 8 bytes
  data.u16(0x3F80).u16(0x4049).u16(0xBF00).u16(0x0000);                   // 8 bytes
  const std::string header =
      R"({"__metadata__": {"format": "pt"},)"
      R"( "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},)"
      R"( "b": {"dtype": "F16", "shape": [4], "data_offsets": [24, 32]},)"
      R"( "c": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [32, 40]}}    )";
  return st_file(header, data.b);
}

std::string open_error(const std::string& path) {
  auto f = SafetensorsFile::open(path);
  EXPECT_FALSE(f.ok()) << path << " opened but should not";
  if (f.ok()) return "";
  EXPECT_NE(f.error().message.find(path), std::string::npos) << f.error().message;
  return f.error().message;
}

std::string header_error(const std::string& name, const std::string& header,
                         size_t data_bytes = 16) {
  return open_error(test::write_file(name, st_file(header, std::vector<uint8_t>(data_bytes, 0))));
}

TEST(SafetensorsFile, ReadsTensors) {
  const std::string path = test::write_file("good.safetensors", good_file());
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->tensors()[0].name, "a");  // header order
  const StTensor* a = f->find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, StDtype::kF32);
  EXPECT_EQ(a->shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(a->num_elements(), 6u);
  EXPECT_EQ(a->nbytes, 24u);
  EXPECT_EQ(to_float(*a), (std::vector<float>{1.0f, -2.5f, 3.0f, 0.125f, 1e-3f, -0.0f}));
  const StTensor* b = f->find("b");
  EXPECT_EQ(b->dtype, StDtype::kF16);
  EXPECT_EQ(to_float(*b), (std::vector<float>{1.0f, -2.5f, std::ldexp(1.0f, -24), INFINITY}));
  const StTensor* c = f->find("c");
  EXPECT_EQ(c->dtype, StDtype::kBF16);
  EXPECT_EQ(st_dtype_name(c->dtype), std::string("BF16"));
  EXPECT_EQ(to_float(*c), (std::vector<float>{1.0f, 3.140625f, -0.5f, 0.0f}));
  EXPECT_EQ(f->find("__metadata__"), nullptr);
  EXPECT_EQ(f->find("zzz"), nullptr);
  const uint8_t* data = a->data;
  SafetensorsFile moved = std::move(*f);
  EXPECT_EQ(moved.find("a")->data, data);
  EXPECT_EQ(moved.file_size(), good_file().size());
}

TEST(SafetensorsFile, EmptyTensorAndEmptyHeader) {
  const std::string header = R"({"e": {"dtype": "F32", "shape": [0, 5], "data_offsets": [0, 0]}})";
  auto f = SafetensorsFile::open(test::write_file("empty_t.safetensors", st_file(header, {})));
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->find("e")->num_elements(), 0u);
  auto g = SafetensorsFile::open(test::write_file("no_tensors.safetensors", st_file("{}", {})));
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_TRUE(g->tensors().empty());
}

TEST(SafetensorsFile, RejectsBadHeaderLength) {
  EXPECT_NE(open_error(test::write_file("tiny.safetensors", std::vector<uint8_t>{1, 2, 3}))
                .find("too small"),
            std::string::npos);
  for (uint64_t n : {uint64_t{0}, uint64_t{1000}, UINT64_MAX, uint64_t{1} << 40}) {
    const auto bytes = Bytes().u64(n).raw(std::string("{}")).b;
    EXPECT_NE(open_error(test::write_file("hlen.safetensors", bytes)).find("header length"),
              std::string::npos)
        << n;
  }
  open_error(test::temp_dir() + "/absent.safetensors");
}

TEST(SafetensorsFile, RejectsBadJson) {
  EXPECT_NE(header_error("malformed.st", R"({"a": {"dtype": )").find("invalid JSON"),
            std::string::npos);
  const std::string ok = R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})";
  EXPECT_NE(header_error("trailing.st", ok + " xyz").find("invalid JSON"), std::string::npos);
  EXPECT_NE(header_error("twice.st", ok + ok).find("invalid JSON"), std::string::npos);
  EXPECT_NE(header_error("array.st", "[1, 2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(header_error("entry.st", R"({"a": 5})").find("tensor 'a': entry is not a JSON object"),
            std::string::npos);
  EXPECT_NE(
      header_error("dup.st", R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                             R"( "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})")
          .find("duplicate tensor 'a'"),
      std::string::npos);
}

TEST(SafetensorsFile, RejectsBadEntries) {
  const auto entry = [](const std::string& body) { return R"({"w.0": {)" + body + "}}"; };
  std::string e =
      header_error("i64.st", entry(R"("dtype": "I64", "shape": [2], "data_offsets": [0, 16])"));
  EXPECT_NE(e.find("tensor 'w.0' has unsupported dtype 'I64'"), std::string::npos) << e;
  e = header_error("f8.st", entry(R"("dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2])"));
  EXPECT_NE(e.find("'F8_E4M3'"), std::string::npos) << e;
  e = header_error("nodtype.st", entry(R"("shape": [2], "data_offsets": [0, 8])"));
  EXPECT_NE(e.find("\"dtype\""), std::string::npos) << e;
  for (const char* shape : {"[-1]", "[2.5]", "[\"2\"]", "5", "null"}) {
    e = header_error("shape.st", entry(std::string(R"("dtype": "F32", "shape": )") + shape +
                                       R"(, "data_offsets": [0, 4])"));
    EXPECT_NE(e.find("\"shape\""), std::string::npos) << shape << ": " << e;
  }
  for (const char* off : {"[0]", "[0, 4, 8]", "[-4, 0]", "\"0-4\""}) {
    e = header_error("offs.st",
                     entry(std::string(R"("dtype": "F32", "shape": [1], "data_offsets": )") + off));
    EXPECT_NE(e.find("data_offsets"), std::string::npos) << off << ": " << e;
  }
  e = header_error("past.st", entry(R"("dtype": "F32", "shape": [8], "data_offsets": [0, 32])"));
  EXPECT_NE(e.find("lie outside the data section (16 bytes)"), std::string::npos) << e;
  e = header_error("reversed.st", entry(R"("dtype": "F32", "shape": [0], "data_offsets": [8, 4])"));
  EXPECT_NE(e.find("lie outside"), std::string::npos) << e;
  e = header_error("size.st", entry(R"("dtype": "F16", "shape": [3], "data_offsets": [0, 8])"));
  EXPECT_NE(e.find("occupies 8 bytes but its F16 shape needs 6"), std::string::npos) << e;
  e = header_error(
      "overflow.st",
      entry(R"("dtype": "F32", "shape": [1099511627776, 1099511627776], "data_offsets": [0, 0])"));
  EXPECT_NE(e.find("overflows"), std::string::npos) << e;
}

TEST(SafetensorsFile, EveryTruncationIsAnError) {
  const std::vector<uint8_t> full = good_file();
  for (size_t n = 0; n < full.size(); ++n) {
    open_error(
        test::write_file("cut.safetensors", std::vector<uint8_t>(full.begin(), full.begin() + n)));
  }
}

// Random byte changes: any outcome but a crash, or an accepted file whose
// tensors disagree with their shape or lie outside the file.
TEST(SafetensorsFile, SurvivesRandomCorruption) {
  const std::vector<uint8_t> good = good_file();
  std::mt19937 rng(99);
  const char alphabet[] = "{}[]\",:0123456789-.eE FBI\\\x00\xff";
  for (int iter = 0; iter < 2000; ++iter) {
    std::vector<uint8_t> bad = good;
    for (int f = 1 + static_cast<int>(rng() % 3); f > 0; --f) {
      bad[rng() % bad.size()] = static_cast<uint8_t>(alphabet[rng() % (sizeof(alphabet) - 1)]);
    }
    auto file = SafetensorsFile::open(test::write_file("fuzz.safetensors", bad));
    if (!file.ok()) continue;
    for (const StTensor& t : file->tensors()) {
      ASSERT_EQ(t.nbytes, t.num_elements() * st_dtype_size(t.dtype));
      ASSERT_LE(t.nbytes, file->file_size());
      (void)to_float(t);  // touches every byte: outside the mapping would fault
    }
  }
}

std::string make_dir(const std::string& name) {
  const auto dir = std::filesystem::path(test::temp_dir()) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::vector<uint8_t> one_tensor_file(const std::string& name, float value) {
  const std::string header =
      "{\"" + name + R"(": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})";
  return st_file(header, Bytes().f32(value).b);
}

TEST(SafetensorsModel, SingleFileDirectory) {
  const std::string dir = make_dir("single");
  test::write_file("single/model.safetensors", good_file());
  auto m = SafetensorsModel::open(dir);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->tensor_count(), 3u);
  EXPECT_EQ(m->total_file_size(), good_file().size());
  EXPECT_EQ(m->tensors()[2]->name, "c");
  auto file = SafetensorsModel::open(dir + "/model.safetensors");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->tensor_count(), 3u);
}

TEST(SafetensorsModel, ShardedDirectory) {
  const std::string dir = make_dir("sharded");
  const auto s1 =
      test::write_file("sharded/model-00001-of-00002.safetensors", one_tensor_file("x", 1.5f));
  const auto s2 =
      test::write_file("sharded/model-00002-of-00002.safetensors", one_tensor_file("y", -2.0f));
  test::write_file(
      "sharded/model.safetensors.index.json",
      R"({"metadata": {"total_size": 8}, "weight_map": {)"
      R"("x": "model-00001-of-00002.safetensors", "y": "model-00002-of-00002.safetensors"}})");
  auto m = SafetensorsModel::open(dir);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->shards().size(), 2u);
  EXPECT_EQ(m->tensor_count(), 2u);
  EXPECT_EQ(to_float(*m->find("x")), std::vector<float>{1.5f});
  EXPECT_EQ(to_float(*m->find("y")), std::vector<float>{-2.0f});
  EXPECT_EQ(m->total_file_size(), std::filesystem::file_size(s1) + std::filesystem::file_size(s2));
}

std::string model_error(const std::string& dir, const std::string& index) {
  if (!index.empty()) test::write_file(dir + "/model.safetensors.index.json", index);
  auto m = SafetensorsModel::open((std::filesystem::path(test::temp_dir()) / dir).string());
  EXPECT_FALSE(m.ok());
  return m.ok() ? "" : m.error().message;
}

TEST(SafetensorsModel, RejectsBadDirectories) {
  make_dir("bad");
  EXPECT_NE(model_error("bad", "").find("no model.safetensors"), std::string::npos);
  test::write_file("bad/a.safetensors", one_tensor_file("x", 1.0f));
  test::write_file("bad/b.safetensors", one_tensor_file("x", 2.0f));
  std::string e =
      model_error("bad", R"({"weight_map": {"x": "a.safetensors", "z": "b.safetensors"}})");
  EXPECT_NE(e.find("also in"), std::string::npos) << e;  // x in both shards
  e = model_error("bad", R"({"weight_map": {"x": "a.safetensors", "q": "a.safetensors"}})");
  EXPECT_NE(e.find("tensor 'q' is not in its shard 'a.safetensors'"), std::string::npos) << e;
  e = model_error("bad", R"({"weight_map": {"x": "../a.safetensors"}})");
  EXPECT_NE(e.find("invalid shard file"), std::string::npos) << e;
  e = model_error("bad", R"({"weight_map": {"x": 3}})");
  EXPECT_NE(e.find("not a string"), std::string::npos) << e;
  e = model_error("bad", R"({"weight_map": {"x": "missing.safetensors"}})");
  EXPECT_NE(e.find("missing.safetensors"), std::string::npos) << e;
  e = model_error("bad", R"({"metadata": {}})");
  EXPECT_NE(e.find("weight_map"), std::string::npos) << e;
  e = model_error("bad", R"({"weight_map": )");
  EXPECT_NE(e.find("invalid JSON"), std::string::npos) << e;
}

}  // namespace
}  // namespace pagoda::model
