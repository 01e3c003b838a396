// GGUF layout (v2/v3, little-endian):
//   "GGUF" u32 version u64 tensor_count u64 kv_count
//   kv_count x { string key; u32 value_type; value }
//   tensor_count x { string name; u32 n_dims; u64 dims[n_dims]; u32 ggml_type; u64 offset }
//   padding to `general.alignment`, then the data section; tensor offsets are
//   relative to the data section and multiples of the alignment.
// string = u64 length + bytes; array = u32 element type + u64 count + elements.
#include "model/gguf_file.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>

#include "model/dequant.hpp"
#include "model/mapped_file.hpp"

namespace pagoda::model {

namespace {

constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;
constexpr int kMaxArrayDepth = 8;
// Upper bound on array elements decoded from one file: each costs a
// GgufValue (~100 bytes), so this bounds memory on hostile input. Real models
// have about 1.5 M (vocab + merges + token types of a 256 k vocabulary).
constexpr uint64_t kMaxArrayElements = uint64_t{1} << 22;

// Smallest encoded size of one value of a type: bounds counts by remaining bytes.
uint64_t min_value_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
    case GgufValueType::kString:
      return 8;
    case GgufValueType::kArray:
      return 12;
  }
  return 1;
}

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::kFloat64); }

const char* type_name(GgufValueType t) {
  static const char* const kNames[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                       "int32",  "float32", "bool",   "string", "array",
                                       "uint64", "int64",   "float64"};
  return kNames[static_cast<uint32_t>(t)];
}

bool is_integer(GgufValueType t) {
  return t != GgufValueType::kFloat32 && t != GgufValueType::kFloat64 &&
         t != GgufValueType::kBool && t != GgufValueType::kString && t != GgufValueType::kArray;
}

bool is_unsigned(GgufValueType t) {
  return t == GgufValueType::kUint8 || t == GgufValueType::kUint16 || t == GgufValueType::kUint32 ||
         t == GgufValueType::kUint64;
}

// Bounds-checked little-endian reader over the mapping. Every failure is an
// Error "<path>: <what>: truncated at byte N ...".
class Reader {
 public:
  Reader(const std::string& path, const uint8_t* data, uint64_t size)
      : path_(path), data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }
  Error fail(const std::string& what) const { return make_error(path_ + ": " + what); }

  Result<uint64_t> uint(unsigned bytes, const char* what) {
    if (remaining() < bytes) return truncated(bytes, what);
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(data_[pos_ + i]) << (8 * i);
    pos_ += bytes;
    return v;
  }

  Result<std::string> string(const char* what) {
    auto len = uint(8, what);
    if (!len) return len.error();
    if (*len > remaining()) {
      return fail(std::string(what) + ": string length " + std::to_string(*len) + " at byte " +
                  std::to_string(pos_ - 8) + " exceeds the " + std::to_string(remaining()) +
                  " bytes left in the file");
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), *len);
    pos_ += *len;
    return s;
  }

 private:
  Error truncated(unsigned bytes, const char* what) const {
    return fail(std::string("file truncated at byte ") + std::to_string(pos_) + " while reading " +
                what + " (need " + std::to_string(bytes) + " bytes, " +
                std::to_string(remaining()) + " left)");
  }

  const std::string& path_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

}  // namespace

struct GgufFile::Impl {
  MappedFile file;
  std::string path;
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;
  uint64_t array_elements = 0;  // decoded so far, bounded by kMaxArrayElements
  std::vector<std::pair<std::string, GgufValue>> metadata;
  std::map<std::string, size_t, std::less<>> key_index;  // key -> index in metadata
  std::vector<GgufTensorInfo> tensors;
  std::map<std::string, size_t, std::less<>> tensor_index;  // name -> index in tensors

  Result<void> parse();
  Result<void> parse_header(Reader& r, uint64_t& n_tensors, uint64_t& n_kv);
  Result<void> parse_kv(Reader& r, uint64_t index);
  Result<GgufValue> parse_value(Reader& r, GgufValueType type, int depth, const std::string& key);
  Result<void> parse_scalar(Reader& r, GgufValue& v, const std::string& key);
  Result<void> parse_alignment();
  Result<void> parse_tensor_info(Reader& r, uint64_t index);
  Result<void> place_tensors(uint64_t header_end);
  Result<void> check_overlaps() const;
};

Result<void> GgufFile::Impl::parse_header(Reader& r, uint64_t& n_tensors, uint64_t& n_kv) {
  if (file.size() < 4 || std::memcmp(file.data(), "GGUF", 4) != 0) {
    return r.fail("not a GGUF file (bad magic; expected \"GGUF\")");
  }
  (void)r.uint(4, "magic");
  auto v = r.uint(4, "version");
  if (!v) return v.error();
  version = static_cast<uint32_t>(*v);
  if (version == 1) return r.fail("GGUF version 1 is not supported (only versions 2 and 3)");
  if (version != 2 && version != 3) {
    const bool swapped = version == 0x02000000u || version == 0x03000000u;
    return r.fail("unsupported GGUF version " + std::to_string(version) +
                  (swapped ? " (a big-endian file?)" : "") +
                  "; only versions 2 and 3 are supported");
  }
  auto nt = r.uint(8, "tensor count");
  if (!nt) return nt.error();
  auto nk = r.uint(8, "metadata count");
  if (!nk) return nk.error();
  n_tensors = *nt;
  n_kv = *nk;
  // Each entry takes at least: key (8-byte length) + type (4) + 1 value byte;
  // a tensor info: name (8) + n_dims (4) + type (4) + offset (8).
  if (n_kv > r.remaining() / 13) {
    return r.fail("metadata count " + std::to_string(n_kv) + " is impossible for the " +
                  std::to_string(r.remaining()) + " bytes left in the file");
  }
  if (n_tensors > r.remaining() / 24) {
    return r.fail("tensor count " + std::to_string(n_tensors) + " is impossible for the " +
                  std::to_string(r.remaining()) + " bytes left in the file");
  }
  return {};
}

Result<void> GgufFile::Impl::parse_scalar(Reader& r, GgufValue& v, const std::string& key) {
  const unsigned bytes = static_cast<unsigned>(min_value_bytes(v.type));
  auto raw = r.uint(bytes, ("value of key '" + key + "'").c_str());
  if (!raw) return raw.error();
  const uint64_t u = *raw;
  switch (v.type) {
    case GgufValueType::kFloat32:
      v.f = std::bit_cast<float>(static_cast<uint32_t>(u));
      break;
    case GgufValueType::kFloat64:
      v.f = std::bit_cast<double>(u);
      break;
    case GgufValueType::kBool:
      v.u = u != 0;
      break;
    case GgufValueType::kInt8:
      v.i = static_cast<int8_t>(u);
      break;
    case GgufValueType::kInt16:
      v.i = static_cast<int16_t>(u);
      break;
    case GgufValueType::kInt32:
      v.i = static_cast<int32_t>(u);
      break;
    case GgufValueType::kInt64:
      v.i = static_cast<int64_t>(u);
      break;
    default:
      v.u = u;
      break;  // unsigned
  }
  if (is_unsigned(v.type)) {
    v.f = static_cast<double>(v.u);
    if (v.u <= static_cast<uint64_t>(INT64_MAX)) v.i = static_cast<int64_t>(v.u);
  } else if (is_integer(v.type)) {
    v.f = static_cast<double>(v.i);
    if (v.i >= 0) v.u = static_cast<uint64_t>(v.i);
  }
  return {};
}

Result<GgufValue> GgufFile::Impl::parse_value(Reader& r, GgufValueType type, int depth,
                                              const std::string& key) {
  GgufValue v;
  v.type = type;
  if (type == GgufValueType::kString) {
    auto s = r.string(("string value of key '" + key + "'").c_str());
    if (!s) return s.error();
    v.s = std::move(*s);
    return v;
  }
  if (type != GgufValueType::kArray) {
    auto ok = parse_scalar(r, v, key);
    if (!ok) return ok.error();
    return v;
  }
  if (depth >= kMaxArrayDepth) {
    return r.fail("key '" + key + "': arrays nested deeper than " + std::to_string(kMaxArrayDepth));
  }
  auto et = r.uint(4, ("array element type of key '" + key + "'").c_str());
  if (!et) return et.error();
  if (!valid_type(static_cast<uint32_t>(*et))) {
    return r.fail("key '" + key + "': unknown array element type " + std::to_string(*et));
  }
  v.array_type = static_cast<GgufValueType>(*et);
  auto count = r.uint(8, ("array length of key '" + key + "'").c_str());
  if (!count) return count.error();
  if (*count > r.remaining() / min_value_bytes(v.array_type)) {
    return r.fail("key '" + key + "': array length " + std::to_string(*count) + " of " +
                  type_name(v.array_type) + " exceeds the " + std::to_string(r.remaining()) +
                  " bytes left in the file");
  }
  array_elements += *count;
  if (array_elements > kMaxArrayElements) {
    return r.fail("key '" + key + "': more than " + std::to_string(kMaxArrayElements) +
                  " array elements in the metadata");
  }
  v.array.reserve(*count);
  for (uint64_t i = 0; i < *count; ++i) {
    auto e = parse_value(r, v.array_type, depth + 1, key);
    if (!e) return e.error();
    v.array.push_back(std::move(*e));
  }
  return v;
}

Result<void> GgufFile::Impl::parse_kv(Reader& r, uint64_t index) {
  const std::string what = "key of metadata entry #" + std::to_string(index);
  auto key = r.string(what.c_str());
  if (!key) return key.error();
  auto type = r.uint(4, ("value type of key '" + *key + "'").c_str());
  if (!type) return type.error();
  if (!valid_type(static_cast<uint32_t>(*type))) {
    return r.fail("key '" + *key + "': unknown value type " + std::to_string(*type));
  }
  if (key_index.count(*key)) return r.fail("duplicate metadata key '" + *key + "'");
  auto value = parse_value(r, static_cast<GgufValueType>(*type), 0, *key);
  if (!value) return value.error();
  metadata.emplace_back(std::move(*key), std::move(*value));
  return {};
}

Result<void> GgufFile::Impl::parse_alignment() {
  auto it = key_index.find("general.alignment");
  if (it == key_index.end()) return {};
  const GgufValue& v = metadata[it->second].second;
  const auto fail = [&](const std::string& what) { return make_error(path + ": " + what); };
  if (!is_integer(v.type)) {
    return fail(std::string("general.alignment has type ") + type_name(v.type) +
                ", expected an integer");
  }
  if (v.i <= 0 || (v.u & (v.u - 1)) != 0 || v.u > (uint64_t{1} << 30)) {
    return fail("general.alignment " + std::to_string(v.i) +
                " is not a power of two between 1 and 2^30");
  }
  alignment = v.u;
  return {};
}

Result<void> GgufFile::Impl::parse_tensor_info(Reader& r, uint64_t index) {
  const std::string what = "name of tensor #" + std::to_string(index);
  auto name = r.string(what.c_str());
  if (!name) return name.error();
  const std::string ctx = "tensor '" + *name + "'";
  if (tensor_index.count(*name)) return r.fail("duplicate " + ctx);
  auto n_dims = r.uint(4, ("dimension count of " + ctx).c_str());
  if (!n_dims) return n_dims.error();
  if (*n_dims > kMaxDims) {
    return r.fail(ctx + " has " + std::to_string(*n_dims) + " dimensions (at most 4 allowed)");
  }
  GgufTensorInfo t;
  t.name = std::move(*name);
  uint64_t n = 1;
  for (uint64_t d = 0; d < *n_dims; ++d) {
    auto dim = r.uint(8, ("dimensions of " + ctx).c_str());
    if (!dim) return dim.error();
    if (*dim != 0 && n > UINT64_MAX / *dim) return r.fail(ctx + ": element count overflows");
    n *= *dim;
    t.dims.push_back(*dim);
  }
  auto type = r.uint(4, ("type of " + ctx).c_str());
  if (!type) return type.error();
  t.raw_type = static_cast<uint32_t>(*type);
  const GgmlTypeTraits* traits = ggml_type_traits(t.raw_type);
  if (!traits) return r.fail(ctx + " has unknown ggml type id " + std::to_string(t.raw_type));
  if (!t.dims.empty() && t.dims[0] % traits->block_elems != 0) {
    return r.fail(ctx + ": row length " + std::to_string(t.dims[0]) + " is not a multiple of the " +
                  traits->name + " block size " + std::to_string(traits->block_elems));
  }
  auto bytes = tensor_bytes(t.raw_type, n);
  if (!bytes) return r.fail(ctx + ": " + bytes.error().message);
  t.nbytes = *bytes;
  auto offset = r.uint(8, ("data offset of " + ctx).c_str());
  if (!offset) return offset.error();
  t.offset = *offset;  // relative until place_tensors()
  tensors.push_back(std::move(t));
  return {};
}

Result<void> GgufFile::Impl::place_tensors(uint64_t header_end) {
  const uint64_t size = file.size();
  data_offset = header_end + (alignment - header_end % alignment) % alignment;
  for (GgufTensorInfo& t : tensors) {
    const std::string ctx = path + ": tensor '" + t.name + "'";
    if (t.offset % alignment != 0) {
      return make_error(ctx + " data offset " + std::to_string(t.offset) +
                        " is not a multiple of the alignment " + std::to_string(alignment));
    }
    const uint64_t rel = t.offset;
    const bool overflow =
        rel > UINT64_MAX - data_offset || t.nbytes > UINT64_MAX - data_offset - rel;
    if (overflow || data_offset + rel + t.nbytes > size) {
      return make_error(ctx + " data [offset " + std::to_string(rel) + ", " +
                        std::to_string(t.nbytes) + " bytes] lies past the end of the file (size " +
                        std::to_string(size) + ", data section starts at " +
                        std::to_string(data_offset) + ")");
    }
    t.offset = data_offset + rel;
  }
  return check_overlaps();
}

// Two tensors whose bytes overlap are a corrupt (or hostile) file: writing
// one would change the other, and a converter never produces them.
Result<void> GgufFile::Impl::check_overlaps() const {
  std::vector<const GgufTensorInfo*> order;
  for (const GgufTensorInfo& t : tensors) {
    if (t.nbytes > 0) order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const GgufTensorInfo* a, const GgufTensorInfo* b) {
    return a->offset < b->offset;
  });
  for (size_t i = 1; i < order.size(); ++i) {
    const GgufTensorInfo& prev = *order[i - 1];
    const GgufTensorInfo& next = *order[i];
    if (next.offset < prev.offset + prev.nbytes) {
      return make_error(path + ": tensors '" + prev.name + "' [" + std::to_string(prev.offset) +
                        ", " + std::to_string(prev.offset + prev.nbytes) + ") and '" + next.name +
                        "' [" + std::to_string(next.offset) + ", " +
                        std::to_string(next.offset + next.nbytes) + ") overlap");
    }
  }
  return {};
}

Result<void> GgufFile::Impl::parse() {
  Reader r(path, file.data(), file.size());
  uint64_t n_tensors = 0, n_kv = 0;
  if (auto ok = parse_header(r, n_tensors, n_kv); !ok) return ok;
  for (uint64_t i = 0; i < n_kv; ++i) {
    if (auto ok = parse_kv(r, i); !ok) return ok;
    key_index.emplace(metadata.back().first, metadata.size() - 1);
  }
  if (auto ok = parse_alignment(); !ok) return ok;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    if (auto ok = parse_tensor_info(r, i); !ok) return ok;
    tensor_index.emplace(tensors.back().name, tensors.size() - 1);
  }
  return place_tensors(r.pos());
}

Result<GgufFile> GgufFile::open(const std::string& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.error();
  auto impl = std::make_unique<Impl>();
  impl->file = std::move(*mapped);
  impl->path = path;
  if (auto ok = impl->parse(); !ok) return ok.error();
  return GgufFile(std::move(impl));
}

GgufFile::GgufFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

const std::string& GgufFile::path() const { return impl_->path; }
uint32_t GgufFile::version() const { return impl_->version; }
uint64_t GgufFile::file_size() const { return impl_->file.size(); }
void GgufFile::release_resident() const { impl_->file.release_resident(); }
uint64_t GgufFile::alignment() const { return impl_->alignment; }
uint64_t GgufFile::data_offset() const { return impl_->data_offset; }

const std::vector<std::pair<std::string, GgufValue>>& GgufFile::metadata() const {
  return impl_->metadata;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = impl_->key_index.find(key);
  return it == impl_->key_index.end() ? nullptr : &impl_->metadata[it->second].second;
}

const std::vector<GgufTensorInfo>& GgufFile::tensors() const { return impl_->tensors; }

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = impl_->tensor_index.find(name);
  return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

const uint8_t* GgufFile::tensor_data(const GgufTensorInfo& tensor) const {
  return impl_->file.data() + tensor.offset;
}

namespace {

Error getter_error(const std::string& path, std::string_view key, const GgufValue* v,
                   const char* expected) {
  if (!v) return make_error(path + ": metadata key '" + std::string(key) + "' is missing");
  std::string got = type_name(v->type);
  if (v->type == GgufValueType::kArray) got += std::string(" of ") + type_name(v->array_type);
  return make_error(path + ": metadata key '" + std::string(key) + "' has type " + got +
                    ", expected " + expected);
}

bool is_numeric(GgufValueType t) {
  return is_integer(t) || t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64;
}

// Integer value of v (requires is_integer(v.type)); fails for uint64 > INT64_MAX.
bool as_int64(const GgufValue& v, int64_t& out) {
  if (is_unsigned(v.type) && v.u > static_cast<uint64_t>(INT64_MAX)) return false;
  out = is_unsigned(v.type) ? static_cast<int64_t>(v.u) : v.i;
  return true;
}

}  // namespace

Result<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufValueType::kString) return getter_error(path(), key, v, "string");
  return v->s;
}

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || !is_integer(v->type)) return getter_error(path(), key, v, "an integer");
  int64_t out = 0;
  if (!as_int64(*v, out)) {
    return make_error(path() + ": metadata key '" + std::string(key) + "' value " +
                      std::to_string(v->u) + " does not fit in int64");
  }
  return out;
}

Result<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || !is_numeric(v->type)) return getter_error(path(), key, v, "a number");
  return v->f;
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufValueType::kBool) return getter_error(path(), key, v, "bool");
  return v->u != 0;
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufValueType::kArray || v->array_type != GgufValueType::kString) {
    return getter_error(path(), key, v, "array of string");
  }
  std::vector<std::string> out;
  out.reserve(v->array.size());
  for (const GgufValue& e : v->array) out.push_back(e.s);
  return out;
}

Result<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufValueType::kArray || !is_integer(v->array_type)) {
    return getter_error(path(), key, v, "array of integers");
  }
  std::vector<int64_t> out(v->array.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (!as_int64(v->array[i], out[i])) {
      return make_error(path() + ": metadata key '" + std::string(key) + "' element " +
                        std::to_string(i) + " does not fit in int64");
    }
  }
  return out;
}

Result<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v || v->type != GgufValueType::kArray || !is_numeric(v->array_type)) {
    return getter_error(path(), key, v, "array of numbers");
  }
  std::vector<float> out(v->array.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(v->array[i].f);
  return out;
}

uint64_t GgufTensorInfo::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return n;
}

}  // namespace pagoda::model
