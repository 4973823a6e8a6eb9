// The Store: where the engine's state is made durable. SQLite (embedded, the default) and
// PostgreSQL implement the same interface over the same schema (store/migrations.cc).
//
// Contract:
// - The store holds no business rules. It knows tables, rows and transactions; the engine decides
//   what goes in them. Table and column names come from code (checked identifiers), values are
//   bound as parameters, never spliced into SQL.
// - Apply(batch) writes every row of the batch in ONE transaction: all of it is durable when it
//   returns ok, none of it when it returns an error (group commit: the engine puts the effects of
//   many commands in one batch).
// - Scan reads a whole table in a stable order; the engine uses it only at start-up to rebuild its
//   in-memory state.
// - Thread-safety: none. One Store object is used by one thread at a time (the engine's writer).
// - Exclusivity: AcquireWriterLock makes sure that a single engine writes the database (SQLite: an
//   flock on "<path>.lock" and an OFD lock on the file itself, so that another path to the same
//   file is refused with an error rather than "taken"; PostgreSQL: a session advisory lock, waited
//   for up to
//   kPostgresLockWaitMilliseconds because a dead engine's backend releases it asynchronously). It
//   fails with `unavailable` when another process holds it. TryAcquireWriterLock is one attempt
//   without waiting (standbys poll it); ReleaseWriterLock gives the lock up (a writer stepping
//   down). PostgreSQL: a writer whose session was lost has lost the lock with it; the store then
//   refuses every call with `unavailable` (it never reconnects behind the writer's back) until
//   ReleaseWriterLock.
// - Fencing: ClaimWriterTerm (under the lock, on a migrated database) makes this store the holder
//   of the next writer term in the engine_writer row. From then on every Apply checks INSIDE its
//   transaction that the row still names that term (PostgreSQL: FOR SHARE, so a takeover's term
//   bump waits for a commit in flight and every later commit of the old writer fails). A writer
//   that was replaced can therefore never commit, whatever its lock or connection believe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.h"

namespace gpuhub::store {

// A column value: SQL NULL, a 64-bit integer (BIGINT) or text (TEXT). Money and timestamps are
// integers (micro-units, microseconds); everything else is text.
using Value = std::variant<std::monostate, std::int64_t, std::string>;

// One row of a Scan: the values of the requested columns, in the requested order.
struct Row {
  std::vector<Value> values;

  // Typed accessors for loaders. A NULL integer reads as 0, a NULL text as "". Asking for the wrong
  // type returns an error rather than guessing (the schema and the loader disagree: a bug).
  Result<std::int64_t> Int(std::size_t column) const;
  Result<std::string> Text(std::size_t column) const;
  bool IsNull(std::size_t column) const;
  // The integer as a narrower field (int, uint32_t; bool: non-zero is true), cast as the loader
  // wrote it.
  template <typename T>
  Result<T> IntAs(std::size_t column) const {
    GPUHUB_ASSIGN_OR_RETURN(std::int64_t value, Int(column));
    return static_cast<T>(value);
  }
  // The text through `parse`, a function that returns a Result (an enum's name, a currency code).
  template <typename Parse>
  auto Parsed(std::size_t column, Parse&& parse) const -> decltype(parse(std::string())) {
    GPUHUB_ASSIGN_OR_RETURN(std::string text, Text(column));
    return parse(text);
  }
};

// One row-level change.
struct Write {
  enum class Kind {
    kUpsert,  // insert, or update the non-key columns of the row with the same key
    kInsert,  // insert; a row with the same key already there fails the batch
    kDelete,  // delete the row with this key (no error when there is none)
    kUpdate,  // set the non-key columns of the row with this key (no error when there is none)
  };
  Kind kind = Kind::kUpsert;
  std::string table;
  std::vector<std::string> columns;
  std::vector<Value> values;
  // The first `key_columns` columns are the primary key (the conflict target of an upsert).
  std::size_t key_columns = 1;
};

// A condition of a Select's WHERE: `column op value` (the value is bound as a parameter).
struct Condition {
  enum class Op { kEq, kNe, kLt, kLe, kGt, kGe };
  std::string column;
  Op op = Op::kEq;
  Value value;
};

// A read of some rows (history pages, start-up loads of open rows, aggregates). Everything but the
// values comes from code and is checked: `columns` are identifiers or the aggregates "count(*)",
// "sum(COL)", "max(COL)", "min(COL)" (sum is cast to BIGINT so both databases return an integer;
// the aggregate of no rows reads as NULL, i.e. 0 through Row::Int); `where` conditions are ANDed;
// `group_by` are identifiers; `order_by` is "COL [ASC|DESC], ..."; `limit` 0 means all rows.
struct Select {
  std::string table;
  std::vector<std::string> columns;
  std::vector<Condition> where;
  std::vector<std::string> group_by;
  std::string order_by;
  std::size_t limit = 0;
};

// The writes of one transaction, in order.
class WriteBatch {
 public:
  using Columns = std::vector<std::pair<std::string, Value>>;

  void Upsert(std::string table, Columns columns, std::size_t key_columns = 1);
  void Insert(std::string table, Columns columns);
  void Delete(std::string table, Columns key);
  // Only the columns named (the key first, `key_columns` of them): an existing row's change
  // (the others keep their values, and indexes on them are not touched).
  void Update(std::string table, Columns columns, std::size_t key_columns = 1);

  bool empty() const { return writes_.empty(); }
  std::size_t size() const { return writes_.size(); }
  const std::vector<Write>& writes() const { return writes_; }
  void Clear() { writes_.clear(); }
  // Drops the writes after the first `size` (a command that failed takes its rows back).
  void Truncate(std::size_t size);

 private:
  void Add(Write::Kind kind, std::string table, Columns columns, std::size_t key_columns);
  std::vector<Write> writes_;
};

// The engine_writer row: who writes the database now (high availability, docs/operations.md).
struct WriterRecord {
  std::int64_t term = 0;     // 0: no engine ever claimed this database
  std::string node;          // the claiming process's id (random per process)
  std::string address;       // HOST:PORT where its API answers, for standbys to forward to
  std::string proxy_secret;  // standbys prove with it that they forward a client's address
  std::int64_t since_us = 0;  // when the term was claimed, on the claimer's clock
};

// A versioned schema change. Migrations are embedded in the binary, applied in order, each in its
// own transaction together with its row in `schema_migrations`.
struct Migration {
  int version;
  const char* name;
  const char* sql;  // one or more statements, portable between SQLite and PostgreSQL
};
// Every migration this binary knows, in order (store/migrations.cc).
const std::vector<Migration>& Migrations();
inline constexpr int kLatestSchema = -1;

class Store {
 public:
  virtual ~Store() = default;

  // "sqlite:/path/to/gpuhub.db" or "postgresql://user@host:port/db" (without any password).
  virtual std::string Describe() const = 0;

  // Polls TryAcquireWriterLock for up to LockWaitMilliseconds(); `unavailable` when another
  // process still holds the lock then.
  Status AcquireWriterLock();
  // One attempt: true when this store holds the writer lock now (also when it already did), false
  // when another process holds it; an error when the database cannot be asked.
  virtual Result<bool> TryAcquireWriterLock() = 0;
  // Gives the writer lock up and forgets the claimed term (PostgreSQL: closes the session; the next
  // call opens a new one). No-op without the lock.
  virtual void ReleaseWriterLock() = 0;

  // Writer terms (high availability). Claim: call while holding the writer lock, on a migrated
  // database; writes term + 1 with `node`, `address`, `proxy_secret` and `now_us`, and fences every
  // later Apply on it. Current: the row as the database has it now (term 0 when none).
  Result<WriterRecord> ClaimWriterTerm(const std::string& node, const std::string& address,
                                       const std::string& proxy_secret, std::int64_t now_us);
  Result<WriterRecord> CurrentWriter();
  // ok while the database still names this store's claimed term (and, PostgreSQL, the session
  // that holds the lock is alive); `unavailable` otherwise. One round trip.
  Status CheckWriterTerm();
  std::int64_t writer_term() const { return writer_term_; }

  // Applies the migrations not yet applied, up to `target_version` (kLatestSchema: all of them).
  // A database newer than this binary (a version it does not know) is failed_precondition.
  Status Migrate(int target_version = kLatestSchema);
  // The highest applied migration; 0 for an empty database. Reads only.
  virtual Result<int> SchemaVersion() = 0;

  virtual Status Apply(const WriteBatch& batch) = 0;

  // Calls `fn` for every row of `table` ordered by `order_by` (a column list from code). Stops and
  // returns the first error `fn` returns.
  virtual Status Scan(std::string_view table, const std::vector<std::string>& columns,
                      std::string_view order_by, const std::function<Status(const Row&)>& fn) = 0;

  // Calls `fn` for every row the Select returns, in its order; stops at the first error `fn`
  // returns. Reads only: on a connection that holds no transaction open it sees every committed
  // write (the engine acknowledges a command only after its commit).
  virtual Status Query(const Select& select, const std::function<Status(const Row&)>& fn) = 0;
  // The database's plan for the Select (SQLite: EXPLAIN QUERY PLAN details; PostgreSQL: EXPLAIN
  // lines), for tests that prove an index serves a query.
  virtual Result<std::vector<std::string>> ExplainPlan(const Select& select) = 0;

 protected:
  // Runs one migration's SQL and records it in schema_migrations, in one transaction.
  virtual Status ApplyMigration(const Migration& migration) = 0;
  virtual Status EnsureMigrationsTable() = 0;

  // How long AcquireWriterLock waits: PostgreSQL kPostgresLockWaitMilliseconds (a dead engine's
  // backend releases the lock asynchronously), SQLite 0 (the kernel releases an flock at once).
  virtual int LockWaitMilliseconds() const { return 0; }

  // The term every Apply checks (0: none claimed, no check). Set by ClaimWriterTerm, cleared by
  // ReleaseWriterLock.
  std::int64_t writer_term_ = 0;
};

// The message of an Apply refused by the fence (both backends say it the same way).
std::string FencedMessage(std::int64_t term);

// Opens (creating when needed) the database named by `url`: "sqlite:PATH" (or a bare path ending in
// .db) or "postgresql://..." / "postgres://...". Does not migrate: call Migrate().
Result<std::unique_ptr<Store>> OpenStore(std::string_view url);
// A connection that only reads the existing database named by `url` (SQLite: never creates the
// file, query_only; PostgreSQL: every transaction READ ONLY). For reads beside the engine's writer
// (store/read_pool.h); never Migrate, Apply or lock with it.
Result<std::unique_ptr<Store>> OpenReadStore(std::string_view url);

// True for a lower-case SQL identifier ([a-z_][a-z0-9_]*, at most 63 bytes).
bool IsIdentifier(std::string_view name);

// Builds the portable SQL of a write with numbered placeholders: "$1, $2" when `dollar`
// (PostgreSQL) or "?1, ?2" (SQLite). Both databases accept INSERT ... ON CONFLICT (...) DO UPDATE.
// The text depends only on the write's shape (kind, table, columns, key_columns), never on its
// values: the backends build it once per shape and keep the prepared statement
// (store/statement_cache.h).
std::string WriteSql(const Write& write, bool dollar);
// The SELECT of a Scan, the same for both databases: "SELECT a, b FROM t ORDER BY a" (no ORDER BY
// when `order_by` is empty). The table and columns must be identifiers (checked: they come from
// code).
std::string ScanSql(std::string_view table, const std::vector<std::string>& columns,
                    std::string_view order_by);
// The SQL of a Select with numbered placeholders ("$1" when `dollar`, else "?1") for the values of
// its conditions, in order. Checks every name (GPUHUB_CHECK: they come from code).
std::string SelectSql(const Select& select, bool dollar);
// The values of a Select's conditions, in placeholder order.
std::vector<Value> SelectParameters(const Select& select);
// The statement that records `migration` as applied in schema_migrations.
std::string RecordMigrationSql(const Migration& migration);

}  // namespace gpuhub::store
