// A store that writes nothing and reads back nothing: the engine benchmarks measure the writer
// without the database with it (bench/engine, bench/rentals).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "store/store.h"

namespace gpuhub::bench {

class NullStore final : public store::Store {
 public:
  std::string Describe() const override { return "null"; }
  Result<bool> TryAcquireWriterLock() override { return true; }  // always the writer
  void ReleaseWriterLock() override {}
  Result<int> SchemaVersion() override { return 0; }
  Status Apply(const store::WriteBatch&) override { return Status::Ok(); }
  Status Scan(std::string_view, const std::vector<std::string>&, std::string_view,
              const std::function<Status(const store::Row&)>&) override {
    return Status::Ok();
  }
  Status Query(const store::Select&, const std::function<Status(const store::Row&)>&) override {
    return Status::Ok();
  }
  Result<std::vector<std::string>> ExplainPlan(const store::Select&) override {
    return std::vector<std::string>{};
  }

 protected:
  Status ApplyMigration(const store::Migration&) override { return Status::Ok(); }
  Status EnsureMigrationsTable() override { return Status::Ok(); }
};

}  // namespace gpuhub::bench
