#include "net/static_files.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

namespace pagoda::net {
namespace {

namespace fs = std::filesystem;
constexpr uintmax_t kMaxFileBytes = uintmax_t(64) << 20;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The relative path for a request path, or nullopt when a segment is unsafe.
std::optional<fs::path> safe_relative(std::string_view path) {
  if (path.empty() || path.front() != '/') return std::nullopt;
  if (path.find('\0') != std::string_view::npos || path.find('\\') != std::string_view::npos) {
    return std::nullopt;
  }
  fs::path rel;
  size_t pos = 1;
  while (pos <= path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string_view::npos) end = path.size();
    std::string_view seg = path.substr(pos, end - pos);
    if (!seg.empty()) {
      if (seg.front() == '.') return std::nullopt;  // "..", ".", hidden files
      rel /= fs::path(std::string(seg));
    }
    pos = end + 1;
  }
  return rel;
}

// True when `file` (canonical) lies strictly under `root` (canonical).
bool is_under(const fs::path& file, const fs::path& root) {
  auto r = root.begin(), f = file.begin();
  for (; r != root.end(); ++r, ++f) {
    if (f == file.end() || *f != *r) return false;
  }
  return f != file.end();
}

}  // namespace

std::string content_type_for(std::string_view name) {
  struct Entry {
    std::string_view ext, type;
  };
  static constexpr Entry kTypes[] = {
      {".html", "text/html; charset=utf-8"},  {".htm", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"}, {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},    {".json", "application/json"},
      {".map", "application/json"},            {".svg", "image/svg+xml"},
      {".png", "image/png"},                   {".ico", "image/x-icon"},
      {".txt", "text/plain; charset=utf-8"},  {".woff2", "font/woff2"},
      {".wasm", "application/wasm"},
  };
  for (const Entry& e : kTypes) {
    if (ends_with(name, e.ext)) return std::string(e.type);
  }
  return "application/octet-stream";
}

std::optional<StaticFile> load_static_file(const std::string& web_root, std::string_view method,
                                           std::string_view path) {
  if (web_root.empty() || (method != "GET" && method != "HEAD")) return std::nullopt;
  std::optional<fs::path> rel = safe_relative(path);
  if (!rel) return std::nullopt;
  std::error_code ec;
  const fs::path root = fs::canonical(web_root, ec);
  if (ec) return std::nullopt;
  fs::path file = root / *rel;
  if (fs::is_directory(file, ec)) file /= "index.html";
  file = fs::canonical(file, ec);
  if (ec || !is_under(file, root) || !fs::is_regular_file(file, ec)) return std::nullopt;
  const uintmax_t size = fs::file_size(file, ec);
  if (ec || size > kMaxFileBytes) return std::nullopt;
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  StaticFile out;
  out.body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  const std::string name = file.filename().string();
  out.content_type = content_type_for(name);
  const bool html = ends_with(name, ".html") || ends_with(name, ".htm");
  out.headers = ui_security_headers();
  out.headers.emplace_back("Cache-Control", html ? "no-cache" : "max-age=3600");
  return out;
}

std::string_view ui_content_security_policy() {
  return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
         "font-src 'self'; connect-src 'self' ws: wss:; object-src 'none'; base-uri 'none'; "
         "form-action 'self'; frame-ancestors 'none'";
}

HeaderList ui_security_headers() {
  return {{"Content-Security-Policy", std::string(ui_content_security_policy())},
          {"X-Content-Type-Options", "nosniff"},
          {"X-Frame-Options", "DENY"},
          {"Referrer-Policy", "no-referrer"}};
}

}  // namespace pagoda::net
