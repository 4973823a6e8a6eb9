#include "cluster.h"

#include <libpq-fe.h>
#include <signal.h>

#include <thread>

namespace gpuhub::testing {

int Cluster::Add() {
  auto node = std::make_unique<ServerProcess>(dir_, options_);
  if (!node->Start()) {
    dead_logs_ += node->Log();
    return -1;
  }
  nodes_.push_back(std::move(node));
  frozen_.push_back(false);
  return size() - 1;
}

std::vector<int> Cluster::Ports() const {
  std::vector<int> ports;
  for (const auto& n : nodes_) {
    if (n) ports.push_back(n->port());
  }
  return ports;
}

int Cluster::Writer(std::chrono::milliseconds wait) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    for (int i = 0; i < size(); ++i) {
      if (!alive(i) || frozen_[static_cast<std::size_t>(i)]) continue;
      HttpClient c(node(i).port());
      c.set_timeout_seconds(2);
      if (c.Call("GET", "/healthz/writer").status == 200) return i;
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Cluster::Kill(int i) {
  if (!alive(i)) return;
  node(i).Kill();
  dead_logs_ += node(i).Log();
  nodes_[static_cast<std::size_t>(i)].reset();
}

void Cluster::Freeze(int i) {
  ::kill(node(i).pid(), SIGSTOP);
  frozen_[static_cast<std::size_t>(i)] = true;
}

void Cluster::Thaw(int i) {
  ::kill(node(i).pid(), SIGCONT);
  frozen_[static_cast<std::size_t>(i)] = false;
}

std::string Cluster::Logs() const {
  std::string out = dead_logs_;
  for (const auto& n : nodes_) {
    if (n) out += n->Log();
  }
  // The last lines are what a failure needs; request lines are most of the rest.
  std::string kept;
  std::size_t start = 0;
  while (start < out.size()) {
    std::size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    std::string line = out.substr(start, end - start);
    if (line.find("event=request ") == std::string::npos) kept += line + "\n";
    start = end + 1;
  }
  return kept.size() > 20000 ? kept.substr(kept.size() - 20000) : kept;
}

std::string Role(int port) {
  HttpClient c(port);
  c.set_timeout_seconds(2);
  auto r = c.Call("GET", "/healthz");
  if (r.status != 200) return "";
  return r.Json().value("role", "");
}

std::string QueryPostgres(const std::string& url, const std::string& sql) {
  PGconn* conn = PQconnectdb(url.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string error = PQerrorMessage(conn);
    PQfinish(conn);
    return "ERROR: " + error;
  }
  PGresult* r = PQexec(conn, sql.c_str());
  std::string out;
  if (PQresultStatus(r) == PGRES_TUPLES_OK) {
    out = PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
  } else if (PQresultStatus(r) != PGRES_COMMAND_OK) {
    out = std::string("ERROR: ") + PQerrorMessage(conn);
  }
  PQclear(r);
  PQfinish(conn);
  return out;
}

int TerminateWriterSession(const std::string& db_url) {
  // The session that holds the writer's advisory lock: a killed writer's session may still be
  // listed under the same name for a moment after its process died (CI once saw the cut of a
  // round fail while one was).
  std::string n = QueryPostgres(
      db_url,
      "SELECT count(pg_terminate_backend(a.pid)) FROM pg_stat_activity a JOIN pg_locks l ON "
      "l.pid = a.pid WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = "
      "'gpuhub writer' AND a.datname = current_database()");
  return n.rfind("ERROR", 0) == 0 || n.empty() ? -1 : std::stoi(n);
}

}  // namespace gpuhub::testing
