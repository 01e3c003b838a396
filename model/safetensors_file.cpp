#include "model/safetensors_file.hpp"

#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "model/dequant.hpp"

namespace pagoda::model {

namespace {

namespace fs = std::filesystem;

// The format's own limit on the JSON header.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

struct DtypeName {
  std::string_view name;
  StDtype dtype;
};
constexpr DtypeName kDtypes[] = {
    {"F32", StDtype::kF32}, {"F16", StDtype::kF16}, {"BF16", StDtype::kBF16}};

std::string json_error(simdjson::error_code e) { return simdjson::error_message(e); }

// Reads an array of non-negative integers.
bool read_uint_array(simdjson::dom::element el, std::vector<uint64_t>& out) {
  simdjson::dom::array arr;
  if (el.get(arr) != simdjson::SUCCESS) return false;
  for (simdjson::dom::element e : arr) {
    uint64_t v = 0;
    if (e.get(v) != simdjson::SUCCESS) return false;
    out.push_back(v);
  }
  return true;
}

// Parses one header entry into t (name already set). data_size: bytes after
// the header. Errors name the file and the tensor.
Result<void> parse_entry(const std::string& path, simdjson::dom::element el, uint64_t data_size,
                         StTensor& t, uint64_t& begin) {
  const std::string ctx = path + ": tensor '" + t.name + "'";
  simdjson::dom::object obj;
  if (el.get(obj) != simdjson::SUCCESS) return make_error(ctx + ": entry is not a JSON object");
  std::string_view dtype;
  if (obj["dtype"].get(dtype) != simdjson::SUCCESS) {
    return make_error(ctx + ": missing or non-string \"dtype\"");
  }
  auto known = std::find_if(std::begin(kDtypes), std::end(kDtypes),
                            [&](const DtypeName& d) { return d.name == dtype; });
  if (known == std::end(kDtypes)) {
    return make_error(ctx + " has unsupported dtype '" + std::string(dtype) +
                      "' (supported: F32, F16, BF16)");
  }
  t.dtype = known->dtype;
  simdjson::dom::element shape, offsets;
  if (obj["shape"].get(shape) != simdjson::SUCCESS || !read_uint_array(shape, t.shape)) {
    return make_error(ctx + ": missing \"shape\" or it is not an array of non-negative integers");
  }
  std::vector<uint64_t> off;
  if (obj["data_offsets"].get(offsets) != simdjson::SUCCESS || !read_uint_array(offsets, off) ||
      off.size() != 2) {
    return make_error(ctx + ": \"data_offsets\" must be [begin, end] (non-negative integers)");
  }
  uint64_t bytes = st_dtype_size(t.dtype);
  for (uint64_t d : t.shape) {
    if (d != 0 && bytes > UINT64_MAX / d) return make_error(ctx + ": shape byte size overflows");
    bytes *= d;
  }
  if (off[0] > off[1] || off[1] > data_size) {
    return make_error(ctx + " data_offsets [" + std::to_string(off[0]) + ", " +
                      std::to_string(off[1]) + "] lie outside the data section (" +
                      std::to_string(data_size) + " bytes)");
  }
  if (off[1] - off[0] != bytes) {
    return make_error(ctx + " occupies " + std::to_string(off[1] - off[0]) + " bytes but its " +
                      st_dtype_name(t.dtype) + " shape needs " + std::to_string(bytes));
  }
  t.nbytes = bytes;
  begin = off[0];
  return {};
}

Result<simdjson::dom::element> parse_json(simdjson::dom::parser& parser, const uint8_t* text,
                                          size_t len, const std::string& what) {
  simdjson::dom::element doc;
  if (auto e = parser.parse(text, len).get(doc); e != simdjson::SUCCESS) {
    return make_error(what + ": invalid JSON: " + json_error(e));
  }
  return doc;
}

// Tensors whose bytes overlap: a corrupt or hostile header.
Result<void> check_overlaps(const std::string& path, const std::vector<StTensor>& tensors) {
  std::vector<const StTensor*> order;
  for (const StTensor& t : tensors) {
    if (t.nbytes > 0) order.push_back(&t);
  }
  std::sort(order.begin(), order.end(),
            [](const StTensor* a, const StTensor* b) { return a->data < b->data; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i]->data < order[i - 1]->data + order[i - 1]->nbytes) {
      return make_error(path + ": tensors '" + order[i - 1]->name + "' and '" + order[i]->name +
                        "' overlap in the data section");
    }
  }
  return {};
}

}  // namespace

const char* st_dtype_name(StDtype dtype) {
  switch (dtype) {
    case StDtype::kF32:
      return "F32";
    case StDtype::kF16:
      return "F16";
    case StDtype::kBF16:
      return "BF16";
  }
  return "?";
}

uint32_t st_dtype_size(StDtype dtype) { return dtype == StDtype::kF32 ? 4 : 2; }

uint64_t StTensor::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.error();
  SafetensorsFile f;
  f.file_ = std::move(*mapped);
  const uint64_t size = f.file_.size();
  if (size < 8)
    return make_error(path + ": file too small for a safetensors header (" + std::to_string(size) +
                      " bytes)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(f.file_.data()[i]) << (8 * i);
  if (n < 2 || n > size - 8 || n > kMaxHeaderBytes) {
    return make_error(path + ": header length " + std::to_string(n) + " is invalid for a file of " +
                      std::to_string(size) + " bytes");
  }
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, f.file_.data() + 8, n, path + ": header");
  if (!doc) return doc.error();
  simdjson::dom::object root;
  if (doc->get(root) != simdjson::SUCCESS)
    return make_error(path + ": header is not a JSON object");
  const uint64_t data_size = size - 8 - n;
  const uint8_t* data = f.file_.data() + 8 + n;
  for (auto [key, value] : root) {
    if (key == "__metadata__") continue;
    StTensor t;
    t.name = std::string(key);
    if (f.index_.count(t.name)) return make_error(path + ": duplicate tensor '" + t.name + "'");
    uint64_t begin = 0;
    if (auto ok = parse_entry(path, value, data_size, t, begin); !ok) return ok.error();
    t.data = data + begin;
    f.index_.emplace(t.name, f.tensors_.size());
    f.tensors_.push_back(std::move(t));
  }
  if (auto ok = check_overlaps(path, f.tensors_); !ok) return ok.error();
  return f;
}

const StTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Result<void> SafetensorsModel::add_shard(SafetensorsFile shard) {
  const size_t s = shards_.size();
  for (size_t i = 0; i < shard.tensors().size(); ++i) {
    const std::string& name = shard.tensors()[i].name;
    auto [it, inserted] = index_.emplace(name, std::make_pair(s, i));
    if (!inserted) {
      return make_error(shard.path() + ": tensor '" + name + "' is also in " +
                        shards_[it->second.first].path());
    }
  }
  shards_.push_back(std::move(shard));
  return {};
}

namespace {

// Shard file names listed by an index's weight_map, with each tensor's shard.
Result<std::vector<std::pair<std::string, std::string>>> read_weight_map(const std::string& path) {
  simdjson::padded_string text;
  if (auto e = simdjson::padded_string::load(path).get(text); e != simdjson::SUCCESS) {
    return make_error(path + ": cannot read: " + json_error(e));
  }
  simdjson::dom::parser parser;
  auto doc = parse_json(parser, reinterpret_cast<const uint8_t*>(text.data()), text.size(), path);
  if (!doc) return doc.error();
  simdjson::dom::object map;
  if (doc->at_key("weight_map").get(map) != simdjson::SUCCESS) {
    return make_error(path + ": missing \"weight_map\" object");
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (auto [name, value] : map) {
    std::string_view file;
    if (value.get(file) != simdjson::SUCCESS) {
      return make_error(path + ": weight_map entry '" + std::string(name) + "' is not a string");
    }
    if (file.empty() || file.find('/') != file.npos || file.find('\\') != file.npos ||
        file == "." || file == "..") {
      return make_error(path + ": weight_map entry '" + std::string(name) +
                        "' names an invalid shard file '" + std::string(file) + "'");
    }
    out.emplace_back(std::string(name), std::string(file));
  }
  return out;
}

}  // namespace

Result<SafetensorsModel> SafetensorsModel::open(const std::string& path) {
  SafetensorsModel model;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    auto f = SafetensorsFile::open(path);
    if (!f) return f.error();
    if (auto ok = model.add_shard(std::move(*f)); !ok) return ok.error();
    return model;
  }
  const fs::path dir(path);
  if (fs::exists(dir / "model.safetensors", ec)) return open((dir / "model.safetensors").string());
  const std::string index_path = (dir / "model.safetensors.index.json").string();
  if (!fs::exists(index_path, ec)) {
    return make_error(path + ": no model.safetensors or model.safetensors.index.json");
  }
  auto entries = read_weight_map(index_path);
  if (!entries) return entries.error();
  std::set<std::string> files;
  for (const auto& e : *entries) files.insert(e.second);
  for (const std::string& file : files) {
    auto f = SafetensorsFile::open((dir / file).string());
    if (!f) return f.error();
    if (auto ok = model.add_shard(std::move(*f)); !ok) return ok.error();
  }
  for (const auto& [name, file] : *entries) {
    const StTensor* t = model.find(name);
    auto it = model.index_.find(name);
    if (!t || fs::path(model.shards_[it->second.first].path()).filename() != file) {
      return make_error(index_path + ": tensor '" + name + "' is not in its shard '" + file + "'");
    }
  }
  return model;
}

void SafetensorsModel::release_resident() const {
  for (const SafetensorsFile& s : shards_) s.release_resident();
}

uint64_t SafetensorsModel::total_file_size() const {
  uint64_t total = 0;
  for (const auto& s : shards_) total += s.file_size();
  return total;
}

std::vector<const StTensor*> SafetensorsModel::tensors() const {
  std::vector<const StTensor*> out;
  out.reserve(index_.size());
  for (const auto& [name, loc] : index_) out.push_back(&shards_[loc.first].tensors()[loc.second]);
  return out;
}

const StTensor* SafetensorsModel::find(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return nullptr;
  return &shards_[it->second.first].tensors()[it->second.second];
}

void to_float(const StTensor& t, float* dst) {
  uint32_t ggml = 0;  // the same byte formats as ggml's F32 / F16 / BF16
  switch (t.dtype) {
    case StDtype::kF32:
      ggml = static_cast<uint32_t>(GgmlType::kF32);
      break;
    case StDtype::kF16:
      ggml = static_cast<uint32_t>(GgmlType::kF16);
      break;
    case StDtype::kBF16:
      ggml = static_cast<uint32_t>(GgmlType::kBF16);
      break;
  }
  (void)dequantize(ggml, t.data, dst, t.num_elements());  // cannot fail for these types
}

std::vector<float> to_float(const StTensor& t) {
  std::vector<float> out(t.num_elements());
  to_float(t, out.data());
  return out;
}

}  // namespace pagoda::model
