// Static files of the web UI (options.web_root) served at `/`.
// GET and HEAD only; `/` and directories map to index.html; content types by
// extension (html, js, css, json, svg, png, ico, txt, ...); caching headers:
// `Cache-Control: no-cache` for HTML pages (the UI's entry point must always
// revalidate), `max-age=3600` for everything else; every file also gets the
// UI's security headers (ui_security_headers). Path traversal is rejected:
// no `..` or hidden (`.name`) segments, no NUL or backslash, and the resolved
// file (symlinks followed) must lie under the canonical web root.
// Thread-safe (reads the file system only).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "net/http_exchange.hpp"

namespace pagoda::net {

struct StaticFile {
  std::string content_type;
  std::string body;  // the whole file (HEAD: the transport drops it, keeps Content-Length)
  HeaderList headers;  // Cache-Control and ui_security_headers()
};

// Headers on every static (web UI) file: a Content-Security-Policy for a
// self-hosted app (scripts, styles, images, fonts from 'self'; connections to
// 'self', ws: and wss:; no inline script or style, no plugins, no framing:
// frame-ancestors 'none'), X-Content-Type-Options: nosniff,
// X-Frame-Options: DENY and Referrer-Policy: no-referrer.
HeaderList ui_security_headers();
// The CSP value of ui_security_headers().
std::string_view ui_content_security_policy();

// The content type for a file name's extension (application/octet-stream when unknown).
std::string content_type_for(std::string_view filename);

// The file for a decoded request path, or nullopt (not found, not a GET/HEAD,
// rejected path, empty web_root): the transport then answers 404.
std::optional<StaticFile> load_static_file(const std::string& web_root, std::string_view method,
                                           std::string_view path);

}  // namespace pagoda::net
