// Requests, responses and the router: the HTTP layer's own light types (no Beast here), so that
// route handlers per domain (accounts, wallets, admin, read API, later market and web sessions)
// are plain C++.
//
// Handlers are asynchronous: a handler gets the request and a Responder, and calls the Responder
// exactly once, from any thread (typically from the engine's completion, after the commit).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace gpuhub::http {

struct Request {
  std::string method;                          // "GET", "POST", ...
  std::string target;                          // as sent: "/v1/transfers?limit=10"
  std::string path;                            // decoded path without the query: "/v1/transfers"
  std::map<std::string, std::string> query;    // decoded query parameters
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string remote_address;  // "127.0.0.1"
  std::string request_id;
  std::map<std::string, std::string> path_params;  // {id} of the route pattern
  // The matched route's pattern ("/v1/bids/{id}"), set by the server before the handler runs:
  // what an API key needs is decided by it (api_key_scopes.h). Empty in hand-made requests.
  std::string route;

  // The header's value or "" when absent.
  const std::string& Header(const std::string& lower_name) const;
  // The bearer token of "Authorization: Bearer <token>", or "" when absent/malformed.
  std::string BearerToken() const;
  // The value of cookie `name` in the Cookie header, or "" when absent.
  std::string Cookie(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  bool close = false;  // close the connection after this response
  // > 0: answered to this authenticated host agent: from now on its connection counts against the
  // agents' own limits (kMaxAgentConnections, kMaxAgentConnectionsPerHost), not the customers'
  // max_connections and per-address caps, so that a fleet's heartbeats and parked long-polls never
  // crowd customers out, nor the other way.
  std::int64_t host_agent_id = 0;

  static Response Json(int status, std::string body);
  // {"error": {"code": "...", "message": "...", "field": "..."}} with the status of the code;
  // "field" only when the status names the request field it concerns (Status::field()).
  static Response Error(const Status& status);
  static Response Error(int http_status, std::string_view code, std::string_view message);
};

using Responder = std::function<void(Response)>;
using Handler = std::function<void(const Request&, Responder)>;

// The HTTP status of a Status code (core/status.h's table).
int HttpStatusOf(StatusCode code);
// The error body for a status (valid JSON, message escaped); `field` is added when not empty.
std::string ErrorBody(std::string_view code, std::string_view message, std::string_view field = {});

class Router {
 public:
  // Pattern segments in braces capture: "/v1/topups/{id}". The pattern is also the route's name
  // in metrics and logs (so ids never become metric labels). The query parameters the route reads
  // follow a '?', separated by '&': "/v1/leases?limit&cursor&as". Any other query parameter is
  // refused by the route itself (400 naming it, behind any wrapper), as unknown body fields are, so that
  // `/v1/rentals?username=victim` is an error rather than silently the caller's own list.
  void Add(std::string method, std::string pattern, Handler handler);
  // Every handler added after this call goes through `wrap` first (nullptr: none): `gpuhub serve`
  // makes the routes that need the writer forward to it from a standby.
  using Wrapper = std::function<Handler(const std::string& method, const std::string& pattern,
                                        Handler handler)>;
  void SetWrapper(Wrapper wrap) { wrap_ = std::move(wrap); }

  struct Match {
    const Handler* handler = nullptr;
    std::string route;  // the pattern
    std::map<std::string, std::string> params;
    std::vector<std::string> allowed_methods;  // when the path matched but the method did not
    const std::vector<std::string>* query_params = nullptr;  // with handler: the ones it reads
  };
  // The first query parameter of `query` that `match` does not read (sorted by name), or "".
  static std::string UnknownQueryParameter(const Match& match,
                                           const std::map<std::string, std::string>& query);
  Match Find(const std::string& method, const std::string& path) const;

  // What was registered, in order: the OpenAPI document's coverage test walks it
  // (docs/openapi.json must describe every route, and only those).
  struct RouteInfo {
    std::string method;
    std::string pattern;                    // without the query: "/v1/leases"
    std::vector<std::string> query_params;  // "limit", "cursor", "as"
  };
  std::vector<RouteInfo> Routes() const;

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<std::string> segments;
    Handler handler;
    std::vector<std::string> query_params;
  };
  std::vector<Route> routes_;
  Wrapper wrap_;
};

// Percent-decodes a URL component; invalid_argument for bad escapes or NUL bytes. `plus_is_space`
// for query strings.
Result<std::string> UrlDecode(std::string_view text, bool plus_is_space);
// Splits "a=1&b=2" (decoding both sides); a name given twice is invalid_argument (which one would
// count is not the client's guess to make).
Result<std::map<std::string, std::string>> ParseQuery(std::string_view query);

}  // namespace gpuhub::http
