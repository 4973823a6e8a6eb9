// Several `gpuhub serve` processes on one database (high availability): the nodes of tests/ha.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "harness.h"

namespace gpuhub::testing {

class Cluster {
 public:
  Cluster(const TempDir& dir, ServerOptions options) : dir_(dir), options_(std::move(options)) {}

  // Starts one more node (the writer if nobody writes yet, else a standby); its index, or -1.
  int Add();
  int size() const { return static_cast<int>(nodes_.size()); }
  ServerProcess& node(int i) { return *nodes_[static_cast<std::size_t>(i)]; }
  bool alive(int i) const { return nodes_[static_cast<std::size_t>(i)] != nullptr; }
  // Ports of the nodes still running.
  std::vector<int> Ports() const;
  // The index of the node whose /healthz/writer answers 200, polling until `wait` ran out; -1.
  // Frozen nodes are not asked (they would not answer).
  int Writer(std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  // SIGKILL, and forget the node.
  void Kill(int i);
  // SIGSTOP / SIGCONT: a node frozen (a long pause, a partition) and back.
  void Freeze(int i);
  void Thaw(int i);
  std::string Logs() const;

 private:
  const TempDir& dir_;
  ServerOptions options_;
  std::vector<std::unique_ptr<ServerProcess>> nodes_;
  std::vector<bool> frozen_;
  std::string dead_logs_;
};

// The role a node's /healthz reports ("writer", "standby", or "" when it does not answer).
std::string Role(int port);

// PostgreSQL: terminates the session of the engine that holds the writer lock (application_name
// "gpuhub writer"), as a network cut or a database restart would; how many were terminated.
int TerminateWriterSession(const std::string& db_url);

// Runs one SQL statement on `url`; the first value of the first row ("" when none; "ERROR: ..."
// when it failed).
std::string QueryPostgres(const std::string& url, const std::string& sql);

}  // namespace gpuhub::testing
