#include "http/static_files.h"

#include <sys/stat.h>

#include <climits>
#include <cstdlib>

#include "core/file.h"

namespace gpuhub::http {
namespace {

constexpr std::size_t kMaxStaticFileBytes = 16 * 1024 * 1024;

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return "";
  return buf;
}

const char* kPlaceholderIndex =
    "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpuhub</title></head>"
    "<body><h1>gpuhub</h1><p>The API is served under <code>/v1/</code>: try "
    "<a href=\"/v1/catalog\">/v1/catalog</a> and <a href=\"/v1/guide\">/v1/guide</a>. "
    "Health: <a href=\"/healthz\">/healthz</a>, metrics: <a href=\"/metrics\">/metrics</a>.</p>"
    "</body></html>\n";

// The pages load only their own scripts, styles and images and talk only to this origin, so
// an injected <script> or a framing site gets nowhere.
void AddPageSecurityHeaders(Response& r) {
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'self'; script-src 'self'; style-src 'self'; "
                         "img-src 'self' data:; connect-src 'self'; font-src 'self'; "
                         "object-src 'none'; base-uri 'self'; form-action 'self'; "
                         "frame-ancestors 'none'");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Referrer-Policy", "same-origin");
}

}  // namespace

std::string ContentTypeFor(const std::string& path) {
  static const std::pair<const char*, const char*> kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".htm", "text/html; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".json", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".jpg", "image/jpeg"},
      {".jpeg", "image/jpeg"},
      {".gif", "image/gif"},
      {".webp", "image/webp"},
      {".ico", "image/x-icon"},
      {".woff2", "font/woff2"},
      {".woff", "font/woff"},
      {".txt", "text/plain; charset=utf-8"},
      {".map", "application/json"},
      {".webmanifest", "application/manifest+json"},
  };
  for (const auto& [ext, type] : kTypes) {
    if (EndsWith(path, ext)) return type;
  }
  return "application/octet-stream";
}

Response ServeStaticFile(const std::string& web_dir, const Request& request) {
  auto not_found = [&] {
    return Response::Error(404, "not_found", "no such page: " + request.path);
  };
  std::string relative = request.path;
  if (relative.find('\0') != std::string::npos || relative.find('\\') != std::string::npos) {
    return Response::Error(400, "invalid_argument", "invalid path");
  }
  // Refuse any ".." segment outright rather than normalizing it.
  std::size_t start = 0;
  while (start <= relative.size()) {
    std::size_t end = relative.find('/', start);
    if (end == std::string::npos) end = relative.size();
    std::string_view segment(relative.data() + start, end - start);
    if (segment == ".." || segment == ".") {
      return Response::Error(400, "invalid_argument", "path segments '.' and '..' are not allowed");
    }
    if (!segment.empty() && segment[0] == '.') return not_found();  // no dotfiles
    start = end + 1;
  }
  if (relative.empty() || relative.back() == '/') relative += "index.html";
  // Without the page (no web directory, or no such file in it) the front page is a placeholder.
  auto placeholder_or_not_found = [&] {
    if (relative != "/index.html") return not_found();
    Response r = Response::Json(200, kPlaceholderIndex);
    r.content_type = "text/html; charset=utf-8";
    r.headers.emplace_back("Cache-Control", "no-cache");
    return r;
  };
  if (web_dir.empty()) return placeholder_or_not_found();
  std::string root = RealPath(web_dir);
  std::string full = RealPath(web_dir + relative);
  if (root.empty() || full.empty()) return placeholder_or_not_found();
  // A symlink inside web/ must not lead outside it.
  if (full.compare(0, root.size(), root) != 0 ||
      (full.size() > root.size() && full[root.size()] != '/')) {
    return not_found();
  }
  struct stat st {};
  if (::stat(full.c_str(), &st) != 0) return not_found();
  if (S_ISDIR(st.st_mode)) {
    Response r = Response::Json(301, "");
    // One leading slash: "//market" must not redirect to "//market/", which a browser reads as
    // the host "market" (an open redirect).
    std::size_t slashes = request.path.find_first_not_of('/');
    r.headers.emplace_back("Location", "/" + request.path.substr(slashes) + "/");
    return r;
  }
  if (!S_ISREG(st.st_mode)) return not_found();
  std::string etag = "\"" + std::to_string(st.st_size) + "-" + std::to_string(st.st_mtime) + "\"";
  // Pages, scripts and styles change together: each is revalidated (a 304 when unchanged), so a
  // new version never runs against an old page. Images and fonts may be cached for an hour.
  bool code = EndsWith(full, ".html") || EndsWith(full, ".js") || EndsWith(full, ".mjs") ||
              EndsWith(full, ".css");
  std::string cache = code ? "no-cache" : "public, max-age=3600";
  if (request.Header("if-none-match") == etag) {
    Response r;
    r.status = 304;
    r.content_type.clear();
    r.headers.emplace_back("ETag", etag);
    r.headers.emplace_back("Cache-Control", cache);
    return r;
  }
  auto content = ReadFile(full, kMaxStaticFileBytes);
  if (!content.ok()) return not_found();
  Response r = Response::Json(200, std::move(content).value());
  r.content_type = ContentTypeFor(full);
  r.headers.emplace_back("ETag", etag);
  r.headers.emplace_back("Cache-Control", cache);
  if (EndsWith(full, ".html")) AddPageSecurityHeaders(r);
  return r;
}

}  // namespace gpuhub::http
