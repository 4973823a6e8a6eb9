// Durable orders per second end to end: a real `gpuhub serve` (SQLite with synchronous=FULL, or
// PostgreSQL with GPUHUB_TEST_PG_URL and --pg), many keep-alive HTTP clients placing bids (GTC
// that rest, IOC that trade against the asks on the book or are cancelled) and cancelling their
// resting bids. Every 2xx answer was committed to the database before it was sent (group commit),
// so this is durable throughput. Prints orders/s and latency percentiles per request, and where
// the engine's single writer spent the run (from its /metrics, before and after): batches
// (one store transaction, one commit and its fsync each), commands and rows per batch, and the
// time inside commits; on SQLite, the WAL's checkpoints (background and the writer's own).
//
//   market_api_bench [--seconds N] [--clients N] [--pg]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
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

}  // namespace

int main(int argc, char** argv) {
  int seconds = 10, clients = 16;
  bool pg = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--clients") && i + 1 < argc) clients = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--pg")) pg = true;
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
  std::atomic<long long> orders{0}, cancels{0}, fills{0}, errors{0};
  std::mutex m;
  std::vector<double> latencies_us;
  std::vector<std::thread> threads;
  WriterFigures before = ReadWriterFigures(setup);
  auto started = std::chrono::steady_clock::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      HttpClient client(server.port());
      std::mt19937_64 rng(static_cast<unsigned>(c) + 1);
      std::vector<long long> resting;
      std::vector<double> mine;
      while (!stop.load()) {
        auto t0 = std::chrono::steady_clock::now();
        HttpResponse resp;
        bool cancel = !resting.empty() && rng() % 100 < 40;
        if (cancel) {
          long long id = resting.back();
          resting.pop_back();
          resp = client.Call("DELETE", "/v1/bids/" + std::to_string(id), nullptr,
                             tokens[static_cast<std::size_t>(c)]);
          if (resp.status == 200) ++cancels;
        } else {
          bool gtc = rng() % 100 < 75;
          json body = {{"gpu", "H100 SXM"}, {"gpus", 1 + static_cast<int>(rng() % 2)}};
          // GTC bids rest below the asks; IOC bids cross (and open a lease) or find nothing.
          body["limit_usd_per_gpu_hour"] =
              gtc ? "1." + std::to_string(100 + rng() % 800) : (rng() % 10 < 3 ? "9.000" : "2.000");
          body["time_in_force"] = gtc ? "gtc" : "ioc";
          resp = client.Call("POST", "/v1/bids", body, tokens[static_cast<std::size_t>(c)]);
          if (resp.status == 201) {
            json b = resp.Json();
            if (b["status"] == "resting") resting.push_back(b["id"]);
            if (b["status"] == "filled") ++fills;
          }
        }
        double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                        .count();
        if (resp.status >= 200 && resp.status < 300) {
          ++orders;
          mine.push_back(us);
        } else if (errors++ == 0) {
          std::fprintf(stderr, "first error: %d %s\n", resp.status, resp.body.c_str());
        }
      }
      std::lock_guard<std::mutex> lock(m);
      latencies_us.insert(latencies_us.end(), mine.begin(), mine.end());
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
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
      "durable orders through the API (%s, %d clients, %.1f s): %lld orders+cancels acknowledged "
      "(%.0f/s), %lld cancels, %lld fills, %lld errors; latency p50 %.2f ms, p99 %.2f ms, p99.9 "
      "%.2f ms; invariants %s, settlement %s\n",
      pg ? "PostgreSQL" : "SQLite", clients, elapsed, orders.load(),
      static_cast<double>(orders.load()) / elapsed, cancels.load(), fills.load(), errors.load(),
      at(0.5) / 1000, at(0.99) / 1000, at(0.999) / 1000,
      check.Json()["invariants"].get<std::string>().c_str(),
      check.Json()["settlement"].get<std::string>().c_str());
  const bool ok = errors.load() == 0 && check.Json()["invariants"] == "ok";
  // SQLite: the WAL's checkpoints of the run, from the event the store logs when it closes.
  server.Terminate();
  const std::string log = server.Log();
  if (std::size_t at = log.find("event=sqlite_wal_closed"); at != std::string::npos) {
    std::printf("%s\n", log.substr(at, log.find('\n', at) - at).c_str());
  }
  return ok ? 0 : 1;
}
