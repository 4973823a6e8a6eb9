#include "http/proxy.h"

#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <set>

#include "http/server.h"
#include "net/http_client.h"

namespace gpuhub::http {
namespace {

// Hop-by-hop headers (RFC 9110 section 7.6.1) and the ones each side sets itself.
bool DroppedRequestHeader(const std::string& name) {
  static const std::set<std::string> kDropped = {
      "connection", "keep-alive",    "proxy-connection",   "te",
      "trailer",    "upgrade",       "transfer-encoding",  "content-length",
      "expect",     "proxy-authorization", "host",             "user-agent",
      kClientAddressHeader, kProxySecretHeader};
  return kDropped.count(name) > 0;
}

bool DroppedResponseHeader(const std::string& name) {
  static const std::set<std::string> kDropped = {
      "connection",   "keep-alive", "proxy-connection", "te",           "trailer",
      "upgrade",      "transfer-encoding", "content-length", "server", "date",
      "content-type", "x-request-id", "x-content-type-options"};
  return kDropped.count(name) > 0;
}

}  // namespace

Response RetryShortly(std::string_view message) {
  Response r = Response::Error(503, "unavailable", message);
  r.headers.emplace_back("Retry-After", "1");
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

WriterProxy::WriterProxy(int threads, std::size_t max_queued, int timeout_seconds)
    : pool_(threads, max_queued), timeout_seconds_(timeout_seconds) {}

void WriterProxy::Forward(const Request& request, const std::string& address,
                          const std::string& secret, Responder respond) {
  if (!request.Header(kProxySecretHeader).empty()) {
    // Forwarded by another node that took us for the writer: the role is moving. One hop only.
    return respond(RetryShortly("the writer role is changing hands; retry"));
  }
  net::Request out;
  out.method = request.method;
  out.target = request.target;
  out.body = request.body;
  bool forwarded_host = false;
  for (const auto& [name, value] : request.headers) {
    if (!DroppedRequestHeader(name)) out.headers.push_back({name, value});
    forwarded_host = forwarded_host || name == "x-forwarded-host";
  }
  // The writer sees its own address as Host; the host the client asked for (a cookie login
  // compares it with Origin) travels as X-Forwarded-Host, unless a proxy in front already set it.
  if (!forwarded_host && !request.Header("host").empty()) {
    out.headers.push_back({"X-Forwarded-Host", request.Header("host")});
  }
  out.headers.push_back({"X-Request-Id", request.request_id});
  out.headers.push_back({kClientAddressHeader, request.remote_address});
  out.headers.push_back({kProxySecretHeader, secret});
  auto shared = std::make_shared<Responder>(std::move(respond));
  int timeout = timeout_seconds_;
  bool queued = pool_.Post([out = std::move(out), address, shared, timeout] {
    // One keep-alive connection per proxy thread and writer; the client resends on a connection
    // the writer had closed only what cannot happen twice.
    thread_local std::map<std::string, std::unique_ptr<net::Client>> clients;
    auto& client = clients[address];
    Result<net::Response> answer = Status::Unavailable("no client");
    if (!client) {
      net::ClientOptions options;
      options.timeout = std::chrono::seconds(timeout);
      options.user_agent = "gpuhub-standby";
      auto opened = net::Client::Open("http://" + address, options);
      if (opened.ok()) client = std::move(opened).value();
      if (!opened.ok()) answer = opened.status();
    }
    if (client) answer = client->Send(out);
    if (!answer.ok()) {
      clients.erase(address);
      spdlog::warn("event=forward_failed writer={} error=\"{}\"", LogSafe(address),
                   LogSafe(answer.status().message()));
      return (*shared)(RetryShortly("this node is a standby and the writer (" + address +
                                    ") did not answer; retry"));
    }
    Response r;
    r.status = answer->status;
    r.body = std::move(answer->body);
    r.content_type.clear();
    for (auto& header : answer->headers) {
      std::string name = header.name;
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (name == "content-type") {
        r.content_type = header.value;
      } else if (!DroppedResponseHeader(name)) {
        r.headers.emplace_back(header.name, header.value);
      }
    }
    (*shared)(std::move(r));
  });
  if (!queued) (*shared)(RetryShortly("too many requests are being forwarded to the writer"));
}

}  // namespace gpuhub::http
