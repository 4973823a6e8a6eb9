// Durable orders per second end to end: a real `gpuhub serve` (SQLite with synchronous=FULL, or
// PostgreSQL with GPUHUB_TEST_PG_URL and --pg), many keep-alive HTTP clients placing bids (GTC
// that rest, IOC that trade against the asks on the book or are cancelled) and cancelling their
// resting bids. Every 2xx answer was committed to the database before it was sent (group commit),
// so this is durable throughput. Prints orders/s and latency percentiles per request, and where
// the engine's single writer spent the run (from its /metrics, before and after): batches
// (one store transaction, one commit and its fsync each), commands and rows per batch, and the
// time inside commits; on SQLite, the WAL's checkpoints (background and the writer's own).
//
// Two load generators: `epoll` (default): one thread drives every client's keep-alive connection
// with non-blocking sockets and pre-formatted requests, like wrk, so that the 2 cores measured are
// mostly the server's; `threads`: a blocking HttpClient and a thread per client (the figures
// before 2026-12-02 were taken with it; its 256 threads compete with the server for the cores and
// add their scheduling delay to every round trip).
//
//   market_api_bench [--seconds N] [--clients N] [--pg] [--driver epoll|threads]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "harness.h"

using namespace gpuhub::testing;

namespace {

// The value of an unlabelled series in Prometheus text ("name value"); 0 when absent.
double Metric(const std::string& text, const std::string& name) {
  std::size_t at = 0;
  while ((at = text.find(name + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') return std::atof(text.c_str() + at + name.size() + 1);
    at += name.size();
  }
  return 0;
}

struct WriterFigures {
  double batches = 0, commands = 0, rows = 0, commit_seconds = 0;
  double applying_us = 0, waiting_us = 0, answering_us = 0;
};

WriterFigures ReadWriterFigures(HttpClient& client) {
  std::string text = client.Call("GET", "/metrics").body;
  return {Metric(text, "gpuhub_engine_batch_commands_count"),
          Metric(text, "gpuhub_engine_batch_commands_sum"),
          Metric(text, "gpuhub_engine_batch_rows_sum"),
          Metric(text, "gpuhub_engine_commit_seconds_sum"),
          Metric(text, "gpuhub_engine_writer_microseconds_total{phase=\"apply\"}"),
          Metric(text, "gpuhub_engine_writer_microseconds_total{phase=\"wait_commit\"}"),
          Metric(text, "gpuhub_engine_writer_microseconds_total{phase=\"answer\"}")};
}


// What the clients saw.
struct Tally {
  std::atomic<long long> orders{0}, cancels{0}, fills{0}, errors{0};
  std::mutex m;
  std::vector<double> latencies_us;

  void Error(int status, const std::string& body) {
    if (errors++ == 0) std::fprintf(stderr, "first error: %d %s\n", status, body.c_str());
  }
};

// One client's next request: 40% a cancel of its newest resting bid (when it has one), else a bid:
// 75% GTC that rests below the asks, 25% IOC that crosses (30% of them at 9.000) or finds nothing.
struct NextRequest {
  bool cancel = false;
  long long cancel_id = 0;
  std::string method, path, body;
};

NextRequest Choose(std::mt19937_64& rng, std::vector<long long>& resting) {
  NextRequest r;
  if (!resting.empty() && rng() % 100 < 40) {
    r.cancel = true;
    r.cancel_id = resting.back();
    resting.pop_back();
    r.method = "DELETE";
    r.path = "/v1/bids/" + std::to_string(r.cancel_id);
    return r;
  }
  bool gtc = rng() % 100 < 75;
  int gpus = 1 + static_cast<int>(rng() % 2);
  std::string limit =
      gtc ? "1." + std::to_string(100 + rng() % 800) : (rng() % 10 < 3 ? "9.000" : "2.000");
  r.method = "POST";
  r.path = "/v1/bids";
  r.body = "{\"gpu\":\"H100 SXM\",\"gpus\":" + std::to_string(gpus) +
           ",\"limit_usd_per_gpu_hour\":\"" + limit + "\",\"time_in_force\":\"" +
           (gtc ? "gtc" : "ioc") + "\"}";
  return r;
}

// Counts an answer; a resting bid's id goes to `resting` (the answer starts {"id":N,...}).
void Record(Tally& tally, const NextRequest& request, int status, const std::string& body,
            std::vector<long long>& resting, double us, std::vector<double>& mine) {
  if (status < 200 || status >= 300) {
    tally.Error(status, body);
    return;
  }
  if (request.cancel) {
    ++tally.cancels;
  } else {
    static constexpr std::string_view kIdPrefix = "{\"id\":";
    if (body.compare(0, kIdPrefix.size(), kIdPrefix) != 0) {
      tally.Error(status, body);
      return;
    }
    long long id = std::atoll(body.c_str() + kIdPrefix.size());
    if (body.find("\"status\":\"resting\"") != std::string::npos) resting.push_back(id);
    if (body.find("\"status\":\"filled\"") != std::string::npos) ++tally.fills;
  }
  ++tally.orders;
  mine.push_back(us);
}

void RunThreadClients(int port, const std::vector<std::string>& tokens, std::atomic<bool>& stop,
                      Tally& tally) {
  std::vector<std::thread> threads;
  for (std::size_t c = 0; c < tokens.size(); ++c) {
    threads.emplace_back([&, c] {
      HttpClient client(port);
      std::mt19937_64 rng(static_cast<unsigned>(c) + 1);
      std::vector<long long> resting;
      std::vector<double> mine;
      while (!stop.load()) {
        auto t0 = std::chrono::steady_clock::now();
        NextRequest next = Choose(rng, resting);
        HttpResponse resp =
            client.Send(next.method, next.path, next.body,
                        {{"Content-Type", "application/json"},
                         {"Authorization", "Bearer " + tokens[c]}});
        double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                        .count();
        Record(tally, next, resp.status, resp.body, resting, us, mine);
      }
      std::lock_guard<std::mutex> lock(tally.m);
      tally.latencies_us.insert(tally.latencies_us.end(), mine.begin(), mine.end());
    });
  }
  while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (auto& t : threads) t.join();
}

// Every client on one thread: a non-blocking keep-alive connection each, one request in flight
// per connection (as a thread per client has), epoll for readiness.
void RunEpollClients(int port, const std::vector<std::string>& tokens, std::atomic<bool>& stop,
                     Tally& tally) {
  struct Client {
    int fd = -1;
    std::mt19937_64 rng;
    std::vector<long long> resting;
    NextRequest request;
    std::string out;
    std::size_t sent = 0;
    std::string in;
    std::chrono::steady_clock::time_point started;
  };
  const int epoll = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<Client> clients(tokens.size());
  std::vector<double> mine;
  auto send_next = [&](std::size_t c) {
    Client& cl = clients[c];
    cl.request = Choose(cl.rng, cl.resting);
    cl.out = cl.request.method + " " + cl.request.path +
             " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + tokens[c] + "\r\n";
    if (cl.request.method == "POST") {
      cl.out += "Content-Type: application/json\r\nContent-Length: " +
                std::to_string(cl.request.body.size()) + "\r\n";
    }
    cl.out += "\r\n" + cl.request.body;
    cl.sent = 0;
    cl.in.clear();
    cl.started = std::chrono::steady_clock::now();
    // Loopback takes a request this small whole; EPOLLOUT covers the rare partial write.
    // The connection is registered for EPOLLIN alone between requests: only a partial write
    // changes that (no epoll_ctl per request, as wrk).
    ssize_t n = ::send(cl.fd, cl.out.data(), cl.out.size(), MSG_NOSIGNAL);
    if (n > 0) cl.sent = static_cast<std::size_t>(n);
    if (cl.sent < cl.out.size()) {
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLOUT;
      ev.data.u64 = c;
      ::epoll_ctl(epoll, EPOLL_CTL_MOD, cl.fd, &ev);
    }
  };
  for (std::size_t c = 0; c < clients.size(); ++c) {
    Client& cl = clients[c];
    cl.rng.seed(c + 1);
    cl.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(cl.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      tally.Error(0, "connect failed");
      return;
    }
    int one = 1;
    ::setsockopt(cl.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::fcntl(cl.fd, F_SETFL, ::fcntl(cl.fd, F_GETFL) | O_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = c;
    ::epoll_ctl(epoll, EPOLL_CTL_ADD, cl.fd, &ev);
  }
  for (std::size_t c = 0; c < clients.size(); ++c) send_next(c);
  std::vector<epoll_event> events(clients.size());
  char buffer[65536];
  while (!stop.load()) {
    int ready = ::epoll_wait(epoll, events.data(), static_cast<int>(events.size()), 50);
    for (int e = 0; e < ready; ++e) {
      std::size_t c = events[static_cast<std::size_t>(e)].data.u64;
      Client& cl = clients[c];
      if (cl.sent < cl.out.size()) {
        ssize_t n = ::send(cl.fd, cl.out.data() + cl.sent, cl.out.size() - cl.sent, MSG_NOSIGNAL);
        if (n > 0) cl.sent += static_cast<std::size_t>(n);
        if (cl.sent == cl.out.size()) {
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.u64 = c;
          ::epoll_ctl(epoll, EPOLL_CTL_MOD, cl.fd, &ev);
        }
      }
      // A read shorter than the buffer emptied the socket: no second recv to hear EAGAIN
      // (level-triggered: more bytes later are another event).
      ssize_t n;
      while ((n = ::recv(cl.fd, buffer, sizeof buffer, 0)) > 0) {
        cl.in.append(buffer, static_cast<std::size_t>(n));
        if (static_cast<std::size_t>(n) < sizeof buffer) break;
      }
      if (n == 0) {
        tally.Error(0, "the server closed a connection");
        stop = true;
        break;
      }
      // A whole answer: status line, headers, Content-Length bytes of body.
      std::size_t head_end = cl.in.find("\r\n\r\n");
      if (head_end == std::string::npos) continue;
      std::size_t length_at = cl.in.find("Content-Length: ");
      if (length_at == std::string::npos || length_at > head_end) {
        tally.Error(0, "an answer without Content-Length: " + cl.in.substr(0, head_end));
        stop = true;
        break;
      }
      std::size_t length = std::strtoull(cl.in.c_str() + length_at + 16, nullptr, 10);
      if (cl.in.size() < head_end + 4 + length) continue;
      int status = std::atoi(cl.in.c_str() + 9);  // "HTTP/1.1 201 Created"
      double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - cl.started)
              .count();
      Record(tally, cl.request, status, cl.in.substr(head_end + 4, length), cl.resting, us, mine);
      send_next(c);
    }
  }
  for (Client& cl : clients) ::close(cl.fd);
  ::close(epoll);
  std::lock_guard<std::mutex> lock(tally.m);
  tally.latencies_us.insert(tally.latencies_us.end(), mine.begin(), mine.end());
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 10, clients = 16;
  bool pg = false;
  std::string driver = "epoll";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--driver") && i + 1 < argc) driver = argv[++i];
    if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--clients") && i + 1 < argc) clients = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--pg")) pg = true;
  }
  if (driver != "epoll" && driver != "threads") {
    std::fprintf(stderr, "--driver is epoll or threads\n");
    return 2;
  }
  TempDir dir;
  std::string db = FreshDatabaseUrl(pg ? "postgresql" : "sqlite", dir);
  if (db.empty()) {
    std::fprintf(stderr, "--pg needs GPUHUB_TEST_PG_URL\n");
    return 2;
  }
  ServerOptions options;
  options.db = db;
  options.clock = "real";
  // Every client connects from 127.0.0.1: without this, the per-address connection cap (and the
  // slots kept for new addresses) refuses clients past ~230 and the run measures refusals.
  options.server_extra = "max_connections_per_address = 0\n";
  auto created = CreateAdmin(dir, options);
  if (created.exit_code != 0) {
    std::fprintf(stderr, "%s\n", created.output.c_str());
    return 1;
  }
  ServerProcess server(dir, options);
  if (!server.Start()) {
    std::fprintf(stderr, "%s\n", server.Log().c_str());
    return 1;
  }
  HttpClient setup(server.port());
  std::string admin = LogInAdmin(setup);
  // Providers with asks on the book (so IOC bids trade), customers with money.
  std::string provider =
      SignUpAndLogIn(setup, "prov", "correct horse battery staple", {"provider"});
  std::string until = UtcTimeFromNow(std::chrono::hours(24 * 300));
  for (int m = 0; m < 200; ++m) {
    auto machine = setup.Call("POST", "/v1/machines", MachineJson("H100 SXM", 8), provider);
    auto ask = setup.Call("POST", "/v1/asks",
                          AskJson(machine.Json()["id"], std::to_string(2 + m % 3) + ".500", until),
                          provider);
    if (ask.status != 201) {
      std::fprintf(stderr, "ask refused: %s\n", ask.body.c_str());
      return 1;
    }
  }
  std::vector<std::string> tokens;
  for (int c = 0; c < clients; ++c) {
    std::string name = "cust" + std::to_string(c);
    tokens.push_back(SignUpAndLogIn(setup, name));
    setup.Call(
        "POST", "/v1/admin/credits",
        {{"username", name}, {"amount", "1000000"}, {"currency", "USD"}, {"reason", "bench"}},
        admin);
  }

  std::atomic<bool> stop{false};
  Tally tally;
  WriterFigures before = ReadWriterFigures(setup);
  auto started = std::chrono::steady_clock::now();
  std::thread load([&] {
    if (driver == "epoll") {
      RunEpollClients(server.port(), tokens, stop, tally);
    } else {
      RunThreadClients(server.port(), tokens, stop, tally);
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  stop = true;
  load.join();
  double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::vector<double>& latencies_us = tally.latencies_us;
  std::sort(latencies_us.begin(), latencies_us.end());
  auto at = [&](double q) {
    return latencies_us.empty()
               ? 0.0
               : latencies_us[std::min(
                     latencies_us.size() - 1,
                     static_cast<std::size_t>(q * static_cast<double>(latencies_us.size())))];
  };
  WriterFigures after = ReadWriterFigures(setup);
  double batches = after.batches - before.batches;
  double commit_seconds = after.commit_seconds - before.commit_seconds;
  std::printf(
      "writer: %.0f batches (%.0f/s; one transaction and commit each), %.1f commands and %.1f rows "
      "per batch, %.2f ms per commit, %.0f%% of the run inside commits\n",
      batches, batches / elapsed, batches > 0 ? (after.commands - before.commands) / batches : 0.0,
      batches > 0 ? (after.rows - before.rows) / batches : 0.0,
      batches > 0 ? 1000 * commit_seconds / batches : 0.0, 100 * commit_seconds / elapsed);
  // The writer thread: applying (commands in memory, their answers built), waiting for the
  // committer (pipelined commit: the batch before is still committing), answering.
  auto share = [&](double after_us, double before_us) {
    return (after_us - before_us) / 1e6 / elapsed * 100;
  };
  std::printf("writer thread: %.0f%% applying, %.0f%% waiting for the commit before, %.0f%% "
              "answering, %.0f%% idle or between batches\n",
              share(after.applying_us, before.applying_us),
              share(after.waiting_us, before.waiting_us),
              share(after.answering_us, before.answering_us),
              100 - share(after.applying_us, before.applying_us) -
                  share(after.waiting_us, before.waiting_us) -
                  share(after.answering_us, before.answering_us));
  auto check = setup.Call("GET", "/v1/admin/market", nullptr, admin);
  std::printf(
      "durable orders through the API (%s, %d clients, %s driver, %.1f s): %lld orders+cancels acknowledged "
      "(%.0f/s), %lld cancels, %lld fills, %lld errors; latency p50 %.2f ms, p99 %.2f ms, p99.9 "
      "%.2f ms; invariants %s, settlement %s\n",
      pg ? "PostgreSQL" : "SQLite", clients, driver.c_str(), elapsed, tally.orders.load(),
      static_cast<double>(tally.orders.load()) / elapsed, tally.cancels.load(),
      tally.fills.load(), tally.errors.load(),
      at(0.5) / 1000, at(0.99) / 1000, at(0.999) / 1000,
      check.Json()["invariants"].get<std::string>().c_str(),
      check.Json()["settlement"].get<std::string>().c_str());
  const bool ok = tally.errors.load() == 0 && check.Json()["invariants"] == "ok";
  // SQLite: the WAL's checkpoints of the run, from the event the store logs when it closes.
  server.Terminate();
  const std::string log = server.Log();
  if (std::size_t at = log.find("event=sqlite_wal_closed"); at != std::string::npos) {
    std::printf("%s\n", log.substr(at, log.find('\n', at) - at).c_str());
  }
  return ok ? 0 : 1;
}
