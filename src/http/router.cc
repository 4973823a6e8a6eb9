#include "http/router.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/json_writer.h"
#include "core/strings.h"

namespace gpuhub::http {

const std::string& Request::Header(const std::string& lower_name) const {
  static const std::string kEmpty;
  auto it = headers.find(lower_name);
  return it == headers.end() ? kEmpty : it->second;
}

std::string Request::BearerToken() const {
  const std::string& auth = Header("authorization");
  if (auth.size() < 8) return "";
  std::string scheme = ToLower(auth.substr(0, 7));
  if (scheme != "bearer ") return "";
  return std::string(Trim(std::string_view(auth).substr(7)));
}

std::string Request::Cookie(std::string_view name) const {
  // RFC 6265 section 5.4: "a=1; b=2". The first pair with the name wins; values may be quoted.
  std::string_view rest = Header("cookie");
  while (!rest.empty()) {
    std::size_t end = rest.find(';');
    std::string_view pair = Trim(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    std::size_t eq = pair.find('=');
    if (eq == std::string_view::npos || Trim(pair.substr(0, eq)) != name) continue;
    std::string_view value = Trim(pair.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    return std::string(value);
  }
  return "";
}

int HttpStatusOf(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kInsufficientFunds:
      return 402;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kConflict:
      return 409;
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kPayloadTooLarge:
      return 413;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

std::string ErrorBody(std::string_view code, std::string_view message, std::string_view field) {
  nlohmann::json body = {{"error", {{"code", code}, {"message", message}}}};
  if (!field.empty()) body["error"]["field"] = field;
  // Messages may quote user input: never let invalid UTF-8 break the JSON.
  return DumpJson(body);
}

Response Response::Json(int status, std::string body) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Response Response::Error(const Status& status) {
  Response r = Error(HttpStatusOf(status.code()), StatusCodeName(status.code()), status.message());
  if (!status.field().empty()) {
    r.body = ErrorBody(StatusCodeName(status.code()), status.message(), status.field());
  }
  return r;
}

Response Response::Error(int http_status, std::string_view code, std::string_view message) {
  Response r;
  r.status = http_status;
  r.body = ErrorBody(code, message);
  return r;
}

namespace {
std::vector<std::string> Segments(std::string_view path) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '/') {
      ++i;
      continue;
    }
    std::size_t end = path.find('/', i);
    if (end == std::string_view::npos) end = path.size();
    out.emplace_back(path.substr(i, end - i));
    i = end;
  }
  return out;
}
}  // namespace

void Router::Add(std::string method, std::string pattern, Handler handler) {
  std::vector<std::string> query_params;
  if (auto question = pattern.find('?'); question != std::string::npos) {
    for (const auto& name : Split(std::string_view(pattern).substr(question + 1), '&')) {
      if (!name.empty()) query_params.push_back(name);
    }
    pattern.resize(question);
  }
  // The query is checked inside the handler, behind whatever wraps it (an admin route's role
  // check answers 403 before anything of the request is judged).
  handler = [handler = std::move(handler), query_params, route = method + " " + pattern](
                const Request& request, Responder respond) {
    for (const auto& [name, value] : request.query) {
      if (std::find(query_params.begin(), query_params.end(), name) != query_params.end()) continue;
      std::string shown = name.substr(0, 64), takes;
      for (const auto& known : query_params) takes += (takes.empty() ? "" : ", ") + known;
      return respond(Response::Error(
          Status::InvalidArgument("unknown query parameter '" + shown + "' (" + route + " takes " +
                                  (takes.empty() ? "none" : takes) + ")")
              .WithField(shown)));
    }
    handler(request, std::move(respond));
  };
  if (wrap_) handler = wrap_(method, pattern, std::move(handler));
  Route r{std::move(method), pattern, Segments(pattern), std::move(handler),
          std::move(query_params)};
  routes_.push_back(std::move(r));
}

std::string Router::UnknownQueryParameter(const Match& match,
                                          const std::map<std::string, std::string>& query) {
  for (const auto& [name, value] : query) {
    bool known = false;
    if (match.query_params) {
      for (const auto& allowed : *match.query_params) known = known || allowed == name;
    }
    if (!known) return name;
  }
  return "";
}

std::vector<Router::RouteInfo> Router::Routes() const {
  std::vector<RouteInfo> out;
  out.reserve(routes_.size());
  for (const Route& r : routes_) out.push_back({r.method, r.pattern, r.query_params});
  return out;
}

Router::Match Router::Find(const std::string& method, const std::string& path) const {
  Match match;
  // Views into `path`, and parameters collected only for a route whose literal segments all match:
  // building a map for every candidate route was ~5k instructions of every request (callgrind).
  std::vector<std::string_view> segments;
  for (std::size_t i = 0; i < path.size();) {
    if (path[i] == '/') {
      ++i;
      continue;
    }
    std::size_t end = std::min(path.find('/', i), path.size());
    segments.push_back(std::string_view(path).substr(i, end - i));
    i = end;
  }
  auto is_param = [](const std::string& want) {
    return want.size() > 2 && want.front() == '{' && want.back() == '}';
  };
  for (const Route& route : routes_) {
    if (route.segments.size() != segments.size()) continue;
    bool ok = true;
    for (std::size_t i = 0; i < segments.size() && ok; ++i) {
      const std::string& want = route.segments[i];
      ok = is_param(want) ? !segments[i].empty() : want == segments[i];
    }
    if (!ok) continue;
    std::map<std::string, std::string> params;
    for (std::size_t i = 0; i < segments.size(); ++i) {
      const std::string& want = route.segments[i];
      if (is_param(want)) params[want.substr(1, want.size() - 2)] = std::string(segments[i]);
    }
    if (route.method == method || (method == "HEAD" && route.method == "GET")) {
      match.handler = &route.handler;
      match.query_params = &route.query_params;
      match.route = route.pattern;
      match.params = std::move(params);
      return match;
    }
    match.allowed_methods.push_back(route.method);
    match.route = route.pattern;
  }
  return match;
}

Result<std::string> UrlDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      int hi = i + 1 < text.size() ? hex(text[i + 1]) : -1;
      int lo = i + 2 < text.size() ? hex(text[i + 2]) : -1;
      if (hi < 0 || lo < 0) return Status::InvalidArgument("bad percent-escape in URL");
      char decoded = static_cast<char>(hi * 16 + lo);
      if (decoded == '\0') return Status::InvalidArgument("NUL byte in URL");
      out.push_back(decoded);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

Result<std::map<std::string, std::string>> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> out;
  for (const auto& part : Split(query, '&')) {
    if (part.empty()) continue;
    auto eq = part.find('=');
    GPUHUB_ASSIGN_OR_RETURN(std::string name, UrlDecode(part.substr(0, eq), true));
    std::string value;
    if (eq != std::string::npos) {
      GPUHUB_ASSIGN_OR_RETURN(value, UrlDecode(std::string_view(part).substr(eq + 1), true));
    }
    if (!out.emplace(name, std::move(value)).second) {
      return Status::InvalidArgument("query parameter '" + name.substr(0, 64) +
                                     "' is given more than once")
          .WithField(name.substr(0, 64));
    }
  }
  return out;
}

}  // namespace gpuhub::http
