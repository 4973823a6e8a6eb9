// The backends' cache of prepared writes, keyed by a write's shape (kind, table, columns,
// key_columns): the SQL text of a Write depends on nothing else (WriteSql), so finding the
// statement of a row needs neither that text nor an allocation, only a hash of the names and their
// comparison with the cached shape. Internal to the store's backends.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/store.h"

namespace gpuhub::store {

// A write's shape as a key: its own copy of the names (what the cache stores), or a view of a
// Write's (what a lookup passes: no copy).
struct WriteShape {
  Write::Kind kind = Write::Kind::kUpsert;
  std::string table;
  std::vector<std::string> columns;
  std::size_t key_columns = 0;

  explicit WriteShape(const Write& write)
      : kind(write.kind), table(write.table), columns(write.columns),
        key_columns(write.key_columns) {}
};

struct WriteShapeHash {
  using is_transparent = void;
  std::size_t operator()(const Write& w) const {
    return Hash(w.kind, w.table, w.columns, w.key_columns);
  }
  std::size_t operator()(const WriteShape& s) const {
    return Hash(s.kind, s.table, s.columns, s.key_columns);
  }
  static std::size_t Hash(Write::Kind kind, std::string_view table,
                          const std::vector<std::string>& columns, std::size_t key_columns) {
    std::size_t h = std::hash<std::string_view>{}(table);
    auto mix = [&h](std::size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
    mix(static_cast<std::size_t>(kind));
    mix(key_columns);
    for (const std::string& c : columns) mix(std::hash<std::string_view>{}(c));
    return h;
  }
};

struct WriteShapeEqual {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return a.kind == b.kind && a.key_columns == b.key_columns && a.table == b.table &&
           a.columns == b.columns;
  }
};

// Statement: what a backend keeps per shape (a prepared sqlite3_stmt*, a server-side statement's
// name). Not thread-safe (one per connection, like the statements themselves).
template <typename Statement>
class StatementCache {
 public:
  // The statement of `write`'s shape; nullptr when none was added yet.
  Statement* Find(const Write& write) {
    auto it = statements_.find(write);
    return it == statements_.end() ? nullptr : &it->second;
  }
  Statement& Add(const Write& write, Statement statement) {
    return statements_.emplace(WriteShape(write), std::move(statement)).first->second;
  }
  template <typename Fn>
  void ForEach(Fn&& fn) {
    for (auto& [shape, statement] : statements_) fn(statement);
  }
  void Clear() { statements_.clear(); }
  std::size_t size() const { return statements_.size(); }

 private:
  std::unordered_map<WriteShape, Statement, WriteShapeHash, WriteShapeEqual> statements_;
};

}  // namespace gpuhub::store
