// Fuzz target: the safetensors header reader (model/safetensors_file).
// Invariants: open() fails with a message naming the file, or every tensor's
// bytes lie inside the file's data section and match its dtype and shape;
// converting each tensor to float reads only those bytes.
#include "fuzz_util.hpp"
#include "model/safetensors_file.hpp"

using namespace pagoda;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchFile scratch(".safetensors");
  if (!fuzz::write_scratch(scratch.path, data, size)) return 0;
  auto f = model::SafetensorsFile::open(scratch.path);
  if (!f) {
    FUZZ_CHECK(f.error().message.find(scratch.path) != std::string::npos,
               "the error names the file");
    return 0;
  }
  const uint8_t* begin = nullptr;
  uint64_t total = 0;
  for (const model::StTensor& t : f->tensors()) {
    FUZZ_CHECK(t.nbytes == t.num_elements() * model::st_dtype_size(t.dtype), "bytes match shape");
    FUZZ_CHECK(f->find(t.name) == &t, "find returns the listed tensor");
    if (begin == nullptr || t.data < begin) begin = t.data;
    total += t.nbytes;
    if (t.nbytes > 0 && t.nbytes <= (uint64_t{1} << 24)) {
      std::vector<float> v = model::to_float(t);
      FUZZ_CHECK(v.size() == t.num_elements(), "one float per element");
    }
  }
  // Tensors do not overlap, so together they fit in the file.
  FUZZ_CHECK(total <= size, "tensors fit in the file");
  auto m = model::SafetensorsModel::open(scratch.path);
  FUZZ_CHECK(m.ok(), "a file that opens also opens as a model");
  FUZZ_CHECK(m->tensor_count() == f->tensors().size(), "the model lists every tensor");
  return 0;
}
