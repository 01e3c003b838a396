// MappedFile: a read-only memory mapping of a whole regular file (RAII).
//
// Contract:
//  - open() maps the file PROT_READ/MAP_PRIVATE; failures (missing file, a
//    directory, permission, mmap error) are Errors naming the path.
//  - An empty file is valid: size() == 0 and data() is a non-null pointer that
//    must not be dereferenced.
//  - The mapping lives until the MappedFile is destroyed or moved from; moving
//    keeps the same address, so pointers into data() survive a move.
//  - Move-only. Thread-safety: const methods may be called from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "gpu/result.hpp"

namespace pagoda::model {

class MappedFile {
 public:
  static Result<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }  // size() bytes
  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::string& path() const { return path_; }

  // Drops this process's resident pages of the mapping (madvise
  // MADV_DONTNEED). The contents stay valid: a later read faults the page
  // back in from the page cache or the file (the mapping is read-only, so no
  // page holds private changes). For after loading, when the weights were
  // copied (packed, converted or uploaded) and the file's pages would
  // otherwise count a second time in the resident set. Best effort: an
  // madvise failure changes nothing.
  void release_resident() const;

 private:
  void reset();

  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;  // true when data_ came from mmap and must be unmapped
};

}  // namespace pagoda::model
