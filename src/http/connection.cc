// One HTTP connection: its requests read and parsed on its strand, each handed to the server's
// router (Server::Impl::Dispatch), the answers written in order, the deadlines of each phase, and
// the boundary no exception crosses (Connection::Guarded).
#include <algorithm>
#include <array>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "http/limits.h"
#include "http/server_impl.h"

namespace gpuhub::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// The key of a client address in the per-address connection count: its bytes, with an IPv4-mapped
// IPv6 address (a dual-stack listener) as its IPv4 address.
std::string AddressKey(const net::ip::address& address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return AddressKey(net::ip::make_address_v4(net::ip::v4_mapped, address.to_v6()));
  }
  if (address.is_v4()) {
    auto bytes = address.to_v4().to_bytes();
    return std::string(bytes.begin(), bytes.end());
  }
  auto bytes = address.to_v6().to_bytes();
  return std::string(bytes.begin(), bytes.end());
}

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket&& socket, Server::Impl& server)
      : stream_(std::move(socket)),
        timer_(stream_.get_executor()),
        buffer_(server.options.max_header_bytes + kMaxReadBufferSlackBytes),
        server_(server) {
    ++server_.connections;
  }
  // The one place a connection stops counting, whichever way it ended (each path closes the socket
  // and drops its handlers' references; queued handlers are dropped with the io_context).
  ~Connection() {
    if (address_counted_) server_.ReleaseAddress(address_key_);
    if (agent_host_ != 0) {
      server_.ReleaseAgent(agent_host_);
    } else {
      --server_.connections;
    }
  }

  // Host agent `host` was answered here: the connection leaves the customers' limits (all and per
  // address) for the agents' own, when those have room. Once: a connection of one host stays its.
  void MoveToAgentPool(std::int64_t host) {
    if (agent_host_ != 0 || !server_.AdmitAgent(host)) return;
    agent_host_ = host;
    --server_.connections;
    if (address_counted_) {
      server_.ReleaseAddress(address_key_);
      address_counted_ = false;
    }
  }

  // Whether this connection may stay (the connection limits); counts it against its client
  // address when it may. Called once, by the accept handler before Start or Refuse.
  Server::Impl::Admission Admit() {
    beast::error_code ec;
    auto endpoint = stream_.socket().remote_endpoint(ec);
    if (ec) {
      // The peer is gone already (reset before accept returned): the first read fails and closes.
      return server_.connections.load() > server_.options.max_connections
                 ? Server::Impl::Admission::kFull
                 : Server::Impl::Admission::kAdmitted;
    }
    remote_ = endpoint.address().to_string();
    address_key_ = AddressKey(endpoint.address());
    auto admission = server_.Admit(address_key_);
    address_counted_ = admission == Server::Impl::Admission::kAdmitted;
    return admission;
  }

  void Start() {
    auto self = shared_from_this();
    net::dispatch(stream_.get_executor(),
                  [self] { self->Guarded("read", [&] { self->ReadHeader(); }); });
  }

  // Answers 503 and closes: a connection limit is reached.
  void Refuse(std::string message) {
    auto self = shared_from_this();
    net::dispatch(stream_.get_executor(), [self, message = std::move(message)] {
      self->Guarded("answer", [&] { self->RefuseRequest(503, "unavailable", message); });
    });
  }

 private:
  // Starts the deadline of the current phase (reading a request's headers or body, waiting idle
  // for the next one, writing an answer): when it passes, the pending operation is cancelled and
  // its handler sees timed_out_. Disarm ends it.
  //
  // The deadline is a number; the timer is touched only when it would otherwise fire too late.
  // Its wait never ends more than timer_tick past when it was set, and every phase is at least
  // timer_tick long, so a new phase's deadline is never before the pending wait ends: when the
  // wait ends it waits again until the deadline (or times the phase out). Setting and cancelling
  // the timer in every phase (idle, headers, body, write: four waits, three cancels, each cancel a
  // completion through the strand) was a tenth of a cheap request's instructions.
  void Arm(int seconds) {
    timed_out_ = false;
    deadline_ = Now() + std::chrono::seconds(seconds);
    if (wait_ends_ <= deadline_) return;  // a wait is pending and ends first (OnTimer)
    WaitUntil(deadline_);
  }
  void Disarm() { deadline_ = kNoDeadline; }
  static constexpr std::size_t kIdleReadBytes = 16 * 1024;  // at most, per read of a new request
  static constexpr std::size_t kReadBytes = 64 * 1024;      // at most, per read after that
  static constexpr std::chrono::steady_clock::time_point kNoDeadline =
      std::chrono::steady_clock::time_point::max();
  static std::chrono::steady_clock::time_point Now() { return std::chrono::steady_clock::now(); }
  void WaitUntil(std::chrono::steady_clock::time_point when) {
    wait_ends_ = std::min(when, Now() + server_.timer_tick);
    std::uint64_t generation = ++timer_generation_;
    timer_.expires_at(wait_ends_);  // cancels a pending wait: its handler sees an old generation
    auto self = shared_from_this();
    timer_.async_wait([self, generation](beast::error_code ec) {
      if (ec || generation != self->timer_generation_) return;  // cancelled or superseded
      self->OnTimer();
    });
  }
  void OnTimer() {
    Guarded("timer", [this] { OnTimerNow(); });
  }
  void OnTimerNow() {
    wait_ends_ = kNoDeadline;
    if (deadline_ == kNoDeadline) return;  // disarmed: the next Arm waits again
    if (Now() < deadline_) return WaitUntil(deadline_);
    deadline_ = kNoDeadline;
    timed_out_ = true;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
  }
  // Closing: the pending wait holds the connection; it goes now, not when the wait ends.
  void StopTimer() {
    deadline_ = kNoDeadline;
    wait_ends_ = kNoDeadline;
    ++timer_generation_;
    timer_.cancel();
  }

  // The next request: a new connection has the header deadline from accept on; a kept-alive one
  // may stay idle for the read timeout, and has the header deadline from the first byte on.
  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_.options.max_header_bytes));
    parser_->body_limit(server_.options.max_body_bytes);
    reading_body_ = false;
    if (fresh_ || buffer_.size() > 0) return ReadHeaderNow();
    Arm(server_.options.read_timeout_seconds);
    // Idle until the next request's first bytes: they are read here (waiting for readiness and
    // then reading was two passes through the scheduler per request).
    auto self = shared_from_this();
    stream_.async_read_some(buffer_.prepare(beast::read_size(buffer_, kIdleReadBytes)),
                            [self](beast::error_code ec, std::size_t bytes) {
                              self->Guarded("read", [&] {
                                if (ec || self->timed_out_)
                                  return self->Close();  // idle for the read timeout, or gone
                                self->buffer_.commit(bytes);
                                self->ReadHeaderNow();
                              });
                            });
  }

  void ReadHeaderNow() {
    fresh_ = false;
    Arm(server_.options.header_timeout_seconds);
    Parse();
  }

  // Feeds the buffered bytes to the parser until the current phase (headers, or the body) is
  // complete, reading more from the socket while it needs more; then OnHeader or OnBody. Every
  // parser call is made here, on this connection's strand, under Guarded: Beast's own read
  // operations would call the parser inside their completion, where an exception (basic_fields
  // throws std::length_error for a field of 64 KiB or more) escapes into io_context::run.
  //
  // Once the headers are in, the unparsed bytes in the buffer are always one incomplete element:
  // a chunk-size line with its extensions, or the last chunk with the whole trailer (Beast parses
  // a trailer only once all of it is buffered). The parser sees at most kMaxChunkLineBytes of the
  // buffer at once, so an element that does not fit is 413 whatever its fields (one long field or
  // many small ones), and no field can reach Beast's 64 KiB field limit.
  void Parse() {
    for (;;) {
      const bool done = reading_body_ ? parser_->is_done() : parser_->is_header_done();
      if (done) break;
      if (buffer_.size() == 0) return ReadMore();
      auto pending = buffer_.data();
      const bool windowed = reading_body_ && pending.size() > kMaxChunkLineBytes;
      if (windowed) pending = net::buffer(pending.data(), kMaxChunkLineBytes);
      beast::error_code ec;
      std::size_t used = 0;
      try {
        used = parser_->put(pending, ec);
      } catch (const std::length_error&) {
        // A field Beast cannot store (possible only with a header limit raised past 64 KiB).
        return OnReadError(reading_body_ ? bhttp::error::buffer_overflow
                                         : bhttp::error::header_limit);
      }
      buffer_.consume(used);
      if (ec == bhttp::error::need_more || (!ec && used == 0)) {
        if (windowed || (reading_body_ && buffer_.size() >= kMaxChunkLineBytes)) {
          return OnReadError(bhttp::error::buffer_overflow);
        }
        return ReadMore();
      }
      if (ec) return OnReadError(ec);
    }
    if (reading_body_) return OnBody();
    OnHeader();
  }

  // One read of what the socket has, into the buffer (at most its free space), then Parse. End of
  // stream as Beast's read operations report it: end_of_stream before any byte of a request,
  // the parser's own error (partial_message) after some.
  void ReadMore() {
    const std::size_t room = buffer_.max_size() - buffer_.size();
    if (room == 0) return OnReadError(bhttp::error::buffer_overflow);
    auto self = shared_from_this();
    stream_.async_read_some(buffer_.prepare(std::min(room, kReadBytes)),
                            [self](beast::error_code ec, std::size_t bytes) {
                              self->Guarded("read", [&] {
                                if (ec == net::error::eof && !self->timed_out_) {
                                  if (!self->parser_->got_some())
                                    return self->OnReadError(bhttp::error::end_of_stream);
                                  beast::error_code eof_ec;
                                  self->parser_->put_eof(eof_ec);
                                  if (eof_ec) return self->OnReadError(eof_ec);
                                  return self->Parse();
                                }
                                if (ec || self->timed_out_) return self->OnReadError(ec);
                                self->buffer_.commit(bytes);
                                self->Parse();
                              });
                            });
  }

  void OnHeader() {
    // The headers are in: the body has the (longer) read timeout.
    Disarm();
    reading_body_ = true;
    Arm(server_.options.read_timeout_seconds);
    // Beast frames a request by Content-Length when Transfer-Encoding does not end in "chunked"
    // (or reads no body at all), where a proxy in front may frame it otherwise: the bytes it
    // sees as this body would be our next request (smuggling). RFC 9112 6.3: 400 and close.
    // Only "chunked" alone is decoded here: another coding before it is 501.
    auto& header = parser_->get();
    if (header.count(bhttp::field::transfer_encoding) != 0 && header.version() < 11) {
      // RFC 9112 6.1: Transfer-Encoding in an HTTP/1.0 message is faulty framing, whatever
      // Content-Length says (a 1.0 proxy in front would not have framed it by chunks).
      Disarm();
      return RefuseRequest(400, "invalid_argument",
                           "malformed HTTP request: Transfer-Encoding is not allowed in HTTP/1.0");
    }
    if (header.count(bhttp::field::transfer_encoding) != 0) {
      std::string codings;
      auto range = header.equal_range(bhttp::field::transfer_encoding);
      for (auto it = range.first; it != range.second; ++it) {
        codings += (codings.empty() ? "" : ",") + std::string(it->value());
      }
      std::vector<std::string> list;
      for (auto coding : bhttp::token_list(codings)) list.emplace_back(coding);
      bool chunked_last = !list.empty() && beast::iequals(list.back(), "chunked");
      if (!chunked_last || !parser_->chunked()) {
        Disarm();
        return RefuseRequest(400, "invalid_argument",
                             "malformed HTTP request: Transfer-Encoding must end with chunked");
      }
      if (list.size() != 1) {
        Disarm();
        return RefuseRequest(501, "invalid_argument",
                             "only Transfer-Encoding: chunked is supported");
      }
    }
    auto length = parser_->content_length();
    if (length && *length > server_.options.max_body_bytes) {
      Disarm();
      return RefuseRequest(413, "payload_too_large",
                           "request body is larger than " +
                               std::to_string(server_.options.max_body_bytes) + " bytes");
    }
    auto& req = parser_->get();
    auto expect = req[bhttp::field::expect];
    if (beast::iequals(expect, "100-continue")) {
      auto self = shared_from_this();
      auto cont = std::make_shared<bhttp::response<bhttp::empty_body>>(bhttp::status::continue_,
                                                                       req.version());
      bhttp::async_write(stream_, *cont, [self, cont](beast::error_code ec2, std::size_t) {
        self->Guarded("write", [&] {
          if (ec2) return self->Close();
          self->Parse();
        });
      });
      return;
    }
    // A request without a body, or whose body came in the same packets as its headers, is
    // complete already: Parse answers it without a read.
    Parse();
  }

  void OnBody() {
    Disarm();
    Handle();
  }

  void OnReadError(beast::error_code ec) {
    Disarm();
    if (timed_out_) {
      if (reading_body_) {
        return RefuseRequest(408, "invalid_argument",
                             "the request body did not arrive within " +
                                 std::to_string(server_.options.read_timeout_seconds) + " s");
      }
      if (parser_->got_some()) {
        return RefuseRequest(408, "invalid_argument",
                             "the request headers did not arrive within " +
                                 std::to_string(server_.options.header_timeout_seconds) + " s");
      }
      return Close();  // a new connection that sent nothing
    }
    if (ec == bhttp::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted ||
        ec == net::error::broken_pipe) {
      return Close();
    }
    if (ec == bhttp::error::header_limit) {
      return RefuseRequest(431, "payload_too_large",
                           "request headers are larger than " +
                               std::to_string(server_.options.max_header_bytes) + " bytes");
    }
    if (ec == bhttp::error::buffer_overflow) {
      // A header line, chunk-size line (extensions) or trailer longer than the read buffer.
      if (!parser_->is_header_done()) {
        return RefuseRequest(431, "payload_too_large",
                             "request headers are larger than " +
                                 std::to_string(server_.options.max_header_bytes) + " bytes");
      }
      return RefuseRequest(413, "payload_too_large",
                           "a chunk-size line or the trailer of the chunked body is longer than " +
                               std::to_string(kMaxChunkLineBytes) + " bytes");
    }
    if (ec == bhttp::error::body_limit) {
      return RefuseRequest(413, "payload_too_large",
                           "request body is larger than " +
                               std::to_string(server_.options.max_body_bytes) + " bytes");
    }
    RefuseRequest(400, "invalid_argument", "malformed HTTP request: " + ec.message());
  }

  void Handle() {
    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    Request request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    head_ = request.method == "HEAD";
    request.remote_address = remote_;  // read once by Admit (a getpeername(2) per request was)
    for (const auto& field : req) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      auto [it, inserted] = request.headers.emplace(name, std::string(field.value()));
      if (!inserted) it->second += ", " + std::string(field.value());
    }
    request.body = std::move(req.body());
    std::string_view target = request.target;
    auto question = target.find('?');
    auto path = UrlDecode(target.substr(0, question), false);
    Status bad;
    if (!path.ok()) {
      bad = path.status();
    } else {
      request.path = *path;
      if (request.path.empty() || request.path[0] != '/') {
        bad = Status::InvalidArgument("the request target must be an absolute path");
      }
    }
    if (bad.ok() && question != std::string_view::npos) {
      auto query = ParseQuery(target.substr(question + 1));
      if (query.ok()) {
        request.query = std::move(query).value();
      } else {
        bad = query.status();
      }
    }
    if (!bad.ok()) return RefuseRequest(bad);
    if (server_.draining) return RefuseRequest(503, "unavailable", "the server is shutting down");
    ++server_.in_flight;
    counted_ = true;
    auto self = shared_from_this();
    // An answer given on this connection's strand (a handler that answers at once) is written
    // there and then; one from another thread (the engine's writer) is queued to the strand.
    // Posting every answer cost a pass through the scheduler and often a wake-up of the other I/O
    // thread (perf: context switches were the largest cost of GET /healthz under wrk).
    server_.Dispatch(std::move(request), [self](Response response) {
      net::dispatch(self->stream_.get_executor(), [self, response = std::move(response)]() mutable {
        self->Guarded("answer", [&] { self->Write(std::move(response)); });
      });
    });
  }

  // Answers a request (or a connection) the server refuses before any route sees it, and closes:
  // counted in gpuhub_http_requests_total{route="protocol"} and logged (rate-limited).
  void RefuseRequest(int status, std::string_view code, const std::string& message) {
    RefuseRequest(status, Response::Error(status, code, message), message);
  }
  void RefuseRequest(const Status& bad) {
    RefuseRequest(HttpStatusOf(bad.code()), Response::Error(bad), bad.message());
  }
  void RefuseRequest(int status, Response response, const std::string& message) {
    bool header_done = parser_ && parser_->is_header_done();
    std::string method =
        header_done ? MethodLabel(std::string(parser_->get().method_string())) : "unknown";
    server_.CountProtocolRefusal(method, status, remote_, message);
    response.close = true;
    keep_alive_ = false;
    if (!version_) version_ = 11;
    Write(std::move(response));
  }

  // The answer's head, written here rather than by Beast's serializer (which walks its field list
  // as a chain of buffer sequences on every write: ~15k of GET /healthz's ~60k instructions,
  // callgrind). The bytes are those Beast wrote (ServerTest.AnswersAreWrittenByteForByte): the
  // status line, Server, Content-Type, X-Content-Type-Options, the handler's headers (each
  // replacing an earlier field of the same name, as Beast's set did), Connection where it is
  // not the version's default, and Content-Length (none for 204 and 304).
  struct Outgoing {
    std::string head;
    std::string body;
  };
  static std::string_view ReasonPhrase(int status) {
    auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
    return std::string_view(reason.data(), reason.size());
  }

  void Write(Response response) {
    if (response.host_agent_id > 0) MoveToAgentPool(response.host_agent_id);
    const unsigned version = version_ ? version_ : 11;
    const bool no_body = response.status == 204 || response.status == 304;
    const bool keep = keep_alive_ && !response.close && !server_.draining;
    std::vector<std::pair<std::string_view, std::string_view>> fields;
    fields.reserve(4 + response.headers.size());
    auto set = [&fields](std::string_view name, std::string_view value) {
      std::erase_if(fields, [name](const auto& f) {
        return beast::iequals(beast::string_view(f.first.data(), f.first.size()),
                              beast::string_view(name.data(), name.size()));
      });
      fields.emplace_back(name, value);
    };
    fields.emplace_back("Server", "gpuhub");
    if (!response.content_type.empty() && !no_body) {
      fields.emplace_back("Content-Type", response.content_type);
    }
    fields.emplace_back("X-Content-Type-Options", "nosniff");
    for (const auto& [name, value] : response.headers) set(name, value);
    if (version >= 11 && !keep) set("Connection", "close");
    if (version < 11 && keep) set("Connection", "keep-alive");
    char length[24];
    if (!no_body) {
      auto [end, ec] = std::to_chars(length, length + sizeof length, response.body.size());
      (void)ec;
      set("Content-Length", std::string_view(length, static_cast<std::size_t>(end - length)));
    }
    auto out = std::make_shared<Outgoing>();
    std::string& head = out->head;
    head.reserve(160 + 64 * fields.size());
    head += version >= 11 ? "HTTP/1.1 " : "HTTP/1.0 ";
    head += std::to_string(response.status);
    head += ' ';
    head += ReasonPhrase(response.status);
    head += "\r\n";
    for (const auto& [name, value] : fields) {
      head += name;
      head += ": ";
      head += value;
      head += "\r\n";
    }
    head += "\r\n";
    if (!no_body && !head_) out->body = std::move(response.body);
    Arm(kWriteTimeoutSeconds);
    auto self = shared_from_this();
    std::array<net::const_buffer, 2> buffers{net::buffer(out->head), net::buffer(out->body)};
    net::async_write(stream_, buffers, [self, out, keep](beast::error_code ec, std::size_t) {
      self->Guarded("write", [&] {
        self->Disarm();
        self->Uncount();
        if (ec || !keep) return self->Close();
        self->ReadHeader();
      });
    });
  }

  void Uncount() {
    if (counted_) {
      counted_ = false;
      --server_.in_flight;
    }
  }

  void Close() {
    StopTimer();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.socket().close(ec);
  }

  // The connection boundary: every completion handler of this connection runs its work through
  // here, so that no exception thrown while reading, parsing or answering a request leaves it (and
  // reaches io_context::run, which would end the process). The connection is counted
  // (gpuhub_http_handler_exceptions_total), logged once and closed; every other connection goes on.
  template <class Work>
  void Guarded(std::string_view where, Work&& work) noexcept {
    try {
      work();
      return;
    } catch (const std::exception& e) {
      server_.CountException(where, remote_, e.what());
    } catch (...) {
      server_.CountException(where, remote_, "an exception that is not a std::exception");
    }
    try {
      Uncount();
      Close();
    } catch (...) {
      // Close only cancels a timer and closes a socket; the destructor finishes the rest.
    }
  }

  beast::tcp_stream stream_;
  net::steady_timer timer_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Server::Impl& server_;
  bool keep_alive_ = false;
  bool head_ = false;
  bool timed_out_ = false;
  std::uint64_t timer_generation_ = 0;  // WaitUntil: which wait is the current one
  std::chrono::steady_clock::time_point deadline_ = kNoDeadline;   // of the current phase (Arm)
  std::chrono::steady_clock::time_point wait_ends_ = kNoDeadline;  // of the pending wait, if any
  bool fresh_ = true;          // no request read yet: the header deadline runs from accept
  bool reading_body_ = false;  // which deadline a timeout is: the header's or the body's
  bool counted_ = false;
  unsigned version_ = 0;
  std::string remote_ = "unknown";  // the peer's address, for the log (set by Admit)
  std::string address_key_;         // set by Admit
  bool address_counted_ = false;    // whether the destructor gives the address's slot back
  std::int64_t agent_host_ = 0;     // > 0: counted as this host agent's (MoveToAgentPool)
};

}  // namespace

void ServeConnection(tcp::socket socket, Server::Impl& server) {
  using Admission = Server::Impl::Admission;
  auto connection = std::make_shared<Connection>(std::move(socket), server);
  switch (server.draining ? Admission::kFull : connection->Admit()) {
    case Admission::kAdmitted:
      connection->Start();
      break;
    case Admission::kFull:
      server.refused.Add();
      connection->Refuse("too many open connections; retry shortly");
      break;
    case Admission::kAddressFull:
      server.refused_per_address.Add();
      connection->Refuse("too many open connections from this address; retry shortly");
      break;
    case Admission::kReservedForNewAddresses:
      server.refused_reserved.Add();
      connection->Refuse(
          "too many open connections; the last ones are kept for new clients; retry shortly");
      break;
  }
}

}  // namespace gpuhub::http
