#include "store/store.h"

#include <chrono>
#include <string>
#include <thread>

#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"

namespace gpuhub::store {

Result<std::int64_t> Row::Int(std::size_t column) const {
  if (column >= values.size())
    return Status::Internal("row has no column " + std::to_string(column));
  const Value& v = values[column];
  if (std::holds_alternative<std::monostate>(v)) return std::int64_t{0};
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  return Status::Internal("column " + std::to_string(column) + " holds text, not an integer");
}

Result<std::string> Row::Text(std::size_t column) const {
  if (column >= values.size())
    return Status::Internal("row has no column " + std::to_string(column));
  const Value& v = values[column];
  if (std::holds_alternative<std::monostate>(v)) return std::string();
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  return Status::Internal("column " + std::to_string(column) + " holds an integer, not text");
}

bool Row::IsNull(std::size_t column) const {
  return column >= values.size() || std::holds_alternative<std::monostate>(values[column]);
}

bool IsIdentifier(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  if (!(name[0] == '_' || (name[0] >= 'a' && name[0] <= 'z'))) return false;
  for (char c : name) {
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

void WriteBatch::Add(Write::Kind kind, std::string table, Columns columns,
                     std::size_t key_columns) {
  GPUHUB_CHECK_MSG(IsIdentifier(table), "table name must be an identifier");
  GPUHUB_CHECK(!columns.empty() && key_columns >= 1 && key_columns <= columns.size());
  Write w;
  w.kind = kind;
  w.table = std::move(table);
  w.key_columns = key_columns;
  w.columns.reserve(columns.size());
  w.values.reserve(columns.size());
  for (auto& [name, value] : columns) {
    GPUHUB_CHECK_MSG(IsIdentifier(name), "column name must be an identifier");
    w.columns.push_back(std::move(name));
    w.values.push_back(std::move(value));
  }
  writes_.push_back(std::move(w));
}

void WriteBatch::Upsert(std::string table, Columns columns, std::size_t key_columns) {
  Add(Write::Kind::kUpsert, std::move(table), std::move(columns), key_columns);
}

void WriteBatch::Insert(std::string table, Columns columns) {
  Add(Write::Kind::kInsert, std::move(table), std::move(columns), 1);
}

void WriteBatch::Update(std::string table, Columns columns, std::size_t key_columns) {
  GPUHUB_CHECK_MSG(key_columns < columns.size(), "an update sets at least one column");
  Add(Write::Kind::kUpdate, std::move(table), std::move(columns), key_columns);
}

void WriteBatch::Delete(std::string table, Columns key) {
  std::size_t n = key.size();
  Add(Write::Kind::kDelete, std::move(table), std::move(key), n);
}

void WriteBatch::Truncate(std::size_t size) {
  if (size < writes_.size()) writes_.resize(size);
}

std::string WriteSql(const Write& write, bool dollar) {
  auto placeholder = [&](std::size_t i) {
    return std::string(dollar ? "$" : "?") + std::to_string(i + 1);
  };
  std::string sql;
  if (write.kind == Write::Kind::kDelete) {
    sql = "DELETE FROM " + write.table + " WHERE ";
    for (std::size_t i = 0; i < write.columns.size(); ++i) {
      if (i) sql += " AND ";
      sql += write.columns[i] + " = " + placeholder(i);
    }
    return sql;
  }
  if (write.kind == Write::Kind::kUpdate) {
    sql = "UPDATE " + write.table + " SET ";
    for (std::size_t i = write.key_columns; i < write.columns.size(); ++i) {
      if (i > write.key_columns) sql += ", ";
      sql += write.columns[i] + " = " + placeholder(i);
    }
    sql += " WHERE ";
    for (std::size_t i = 0; i < write.key_columns; ++i) {
      if (i) sql += " AND ";
      sql += write.columns[i] + " = " + placeholder(i);
    }
    return sql;
  }
  sql = "INSERT INTO " + write.table + " (";
  for (std::size_t i = 0; i < write.columns.size(); ++i) {
    if (i) sql += ", ";
    sql += write.columns[i];
  }
  sql += ") VALUES (";
  for (std::size_t i = 0; i < write.columns.size(); ++i) {
    if (i) sql += ", ";
    sql += placeholder(i);
  }
  sql += ")";
  if (write.kind == Write::Kind::kUpsert) {
    sql += " ON CONFLICT (";
    for (std::size_t i = 0; i < write.key_columns; ++i) {
      if (i) sql += ", ";
      sql += write.columns[i];
    }
    sql += ")";
    if (write.key_columns == write.columns.size()) {
      sql += " DO NOTHING";
    } else {
      sql += " DO UPDATE SET ";
      for (std::size_t i = write.key_columns; i < write.columns.size(); ++i) {
        if (i > write.key_columns) sql += ", ";
        sql += write.columns[i] + " = excluded." + write.columns[i];
      }
    }
  }
  return sql;
}

std::string ScanSql(std::string_view table, const std::vector<std::string>& columns,
                    std::string_view order_by) {
  GPUHUB_CHECK(IsIdentifier(table) && !columns.empty());
  std::string sql = "SELECT ";
  for (std::size_t i = 0; i < columns.size(); ++i) {
    GPUHUB_CHECK(IsIdentifier(columns[i]));
    if (i) sql += ", ";
    sql += columns[i];
  }
  sql += " FROM " + std::string(table);
  if (!order_by.empty()) sql += " ORDER BY " + std::string(order_by);
  return sql;
}

namespace {

// "sum(col)" -> "CAST(SUM(col) AS BIGINT)" and the like; identifiers as they are.
std::string SelectColumn(const std::string& column) {
  if (IsIdentifier(column)) return column;
  if (column == "count(*)") return "COUNT(*)";
  const std::size_t open = column.find('(');
  GPUHUB_CHECK_MSG(open != std::string::npos && column.back() == ')',
                   "a Select column is an identifier or an aggregate");
  const std::string function = column.substr(0, open);
  const std::string argument = column.substr(open + 1, column.size() - open - 2);
  GPUHUB_CHECK_MSG(IsIdentifier(argument), "an aggregate's argument is a column");
  if (function == "sum") return "CAST(SUM(" + argument + ") AS BIGINT)";
  GPUHUB_CHECK_MSG(function == "max" || function == "min", "aggregates: count(*), sum, max, min");
  return (function == "max" ? "MAX(" : "MIN(") + argument + ")";
}

// "a DESC, b" checked term by term.
std::string SelectOrder(std::string_view order_by) {
  std::string out;
  std::size_t start = 0;
  while (start <= order_by.size()) {
    std::size_t comma = order_by.find(',', start);
    if (comma == std::string_view::npos) comma = order_by.size();
    std::string_view term = order_by.substr(start, comma - start);
    while (!term.empty() && term.front() == ' ') term.remove_prefix(1);
    while (!term.empty() && term.back() == ' ') term.remove_suffix(1);
    std::string_view direction;
    if (std::size_t space = term.find(' '); space != std::string_view::npos) {
      direction = term.substr(space + 1);
      term = term.substr(0, space);
    }
    GPUHUB_CHECK_MSG(IsIdentifier(term), "order_by names columns");
    GPUHUB_CHECK_MSG(direction.empty() || direction == "ASC" || direction == "DESC",
                     "order_by directions are ASC or DESC");
    if (!out.empty()) out += ", ";
    out += term;
    if (!direction.empty()) out += " " + std::string(direction);
    start = comma + 1;
  }
  return out;
}

const char* OperatorSql(Condition::Op op) {
  switch (op) {
    case Condition::Op::kEq: return " = ";
    case Condition::Op::kNe: return " <> ";
    case Condition::Op::kLt: return " < ";
    case Condition::Op::kLe: return " <= ";
    case Condition::Op::kGt: return " > ";
    case Condition::Op::kGe: return " >= ";
  }
  return " = ";
}

}  // namespace

std::string SelectSql(const Select& select, bool dollar) {
  GPUHUB_CHECK_MSG(IsIdentifier(select.table) && !select.columns.empty(),
                   "a Select names a table and columns");
  std::string sql = "SELECT ";
  for (std::size_t i = 0; i < select.columns.size(); ++i) {
    if (i) sql += ", ";
    sql += SelectColumn(select.columns[i]);
  }
  sql += " FROM " + select.table;
  for (std::size_t i = 0; i < select.where.size(); ++i) {
    const Condition& c = select.where[i];
    GPUHUB_CHECK_MSG(IsIdentifier(c.column), "a condition names a column");
    GPUHUB_CHECK_MSG(!std::holds_alternative<std::monostate>(c.value),
                     "conditions compare with a value (NULL compares with nothing)");
    sql += i ? " AND " : " WHERE ";
    sql += c.column;
    sql += OperatorSql(c.op);
    sql += (dollar ? "$" : "?") + std::to_string(i + 1);
  }
  for (std::size_t i = 0; i < select.group_by.size(); ++i) {
    GPUHUB_CHECK_MSG(IsIdentifier(select.group_by[i]), "group_by names columns");
    sql += i ? ", " : " GROUP BY ";
    sql += select.group_by[i];
  }
  if (!select.order_by.empty()) sql += " ORDER BY " + SelectOrder(select.order_by);
  if (select.limit > 0) sql += " LIMIT " + std::to_string(select.limit);
  return sql;
}

std::vector<Value> SelectParameters(const Select& select) {
  std::vector<Value> values;
  values.reserve(select.where.size());
  for (const Condition& c : select.where) values.push_back(c.value);
  return values;
}

std::string RecordMigrationSql(const Migration& migration) {
  return "INSERT INTO schema_migrations (version, name) VALUES (" +
         std::to_string(migration.version) + ", '" + migration.name + "')";
}

Status Store::Migrate(int target_version) {
  const auto& all = Migrations();
  int latest = all.empty() ? 0 : all.back().version;
  if (target_version == kLatestSchema) target_version = latest;
  if (target_version < 0 || target_version > latest) {
    return Status::InvalidArgument("no migration " + std::to_string(target_version) +
                                   " (this binary knows 1.." + std::to_string(latest) + ")");
  }
  GPUHUB_RETURN_IF_ERROR(EnsureMigrationsTable());
  GPUHUB_ASSIGN_OR_RETURN(int current, SchemaVersion());
  if (current > latest) {
    return Status::FailedPrecondition(Describe() + " has schema version " +
                                      std::to_string(current) + " but this gpuhub knows only " +
                                      std::to_string(latest) +
                                      ": upgrade gpuhub before opening this database");
  }
  for (const Migration& m : all) {
    if (m.version <= current || m.version > target_version) continue;
    GPUHUB_RETURN_IF_ERROR(ApplyMigration(m).WithContext("migration " + std::to_string(m.version) +
                                                         " (" + m.name + ")"));
  }
  return Status::Ok();
}

Status Store::AcquireWriterLock() {
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(LockWaitMilliseconds());
  while (true) {
    GPUHUB_ASSIGN_OR_RETURN(bool held, TryAcquireWriterLock());
    if (held) return Status::Ok();
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Unavailable(Describe() +
                                 " is in use by another gpuhub engine (it holds the writer lock: a "
                                 "running `gpuhub serve`?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string FencedMessage(std::int64_t term) {
  return "fenced: writer term " + std::to_string(term) +
         " is no longer the database's (another engine took over); nothing was written";
}

Result<WriterRecord> Store::CurrentWriter() {
  WriterRecord record;
  GPUHUB_RETURN_IF_ERROR(Scan("engine_writer",
                              {"term", "node", "address", "proxy_secret", "since_us"}, "id",
                              [&](const Row& row) -> Status {
                                GPUHUB_ASSIGN_OR_RETURN(record.term, row.Int(0));
                                GPUHUB_ASSIGN_OR_RETURN(record.node, row.Text(1));
                                GPUHUB_ASSIGN_OR_RETURN(record.address, row.Text(2));
                                GPUHUB_ASSIGN_OR_RETURN(record.proxy_secret, row.Text(3));
                                GPUHUB_ASSIGN_OR_RETURN(record.since_us, row.Int(4));
                                return Status::Ok();
                              }));
  return record;
}

Result<WriterRecord> Store::ClaimWriterTerm(const std::string& node, const std::string& address,
                                            const std::string& proxy_secret,
                                            std::int64_t now_us) {
  // Under the writer lock nobody else changes the row, so read-then-write is safe; the write
  // itself is fenced by nothing (writer_term_ 0) and waits on PostgreSQL for a commit of the
  // previous writer still holding the row FOR SHARE.
  writer_term_ = 0;
  GPUHUB_ASSIGN_OR_RETURN(WriterRecord previous, CurrentWriter());
  WriterRecord claimed{previous.term + 1, node, address, proxy_secret, now_us};
  WriteBatch batch;
  batch.Upsert("engine_writer", {{"id", std::int64_t{1}},
                                 {"term", claimed.term},
                                 {"node", claimed.node},
                                 {"address", claimed.address},
                                 {"proxy_secret", claimed.proxy_secret},
                                 {"since_us", claimed.since_us}});
  GPUHUB_RETURN_IF_ERROR(Apply(batch).WithContext("claiming writer term " +
                                                  std::to_string(claimed.term)));
  writer_term_ = claimed.term;
  return claimed;
}

Status Store::CheckWriterTerm() {
  GPUHUB_ASSIGN_OR_RETURN(WriterRecord now, CurrentWriter());
  if (writer_term_ == 0 || now.term != writer_term_) {
    return Status::Unavailable(Describe() + ": " + FencedMessage(writer_term_) + " (term " +
                               std::to_string(now.term) + " is, held by node " + now.node + ")");
  }
  return Status::Ok();
}

namespace {

// How a server opens its database: as its writer, or as a reader beside it.
Result<std::unique_ptr<Store>> Open(std::string_view url, bool reader) {
  if (url.starts_with("postgresql://") || url.starts_with("postgres://")) {
    GPUHUB_ASSIGN_OR_RETURN(auto pg, PostgresStore::Open(std::string(url), reader));
    return std::unique_ptr<Store>(std::move(pg));
  }
  std::string path;
  if (url.starts_with("sqlite:")) {
    path = std::string(url.substr(7));
    if (path.starts_with("//")) path = path.substr(2);  // sqlite:///abs/path and sqlite://rel
  } else if (url.ends_with(".db") || url.ends_with(".sqlite")) {
    path = std::string(url);
  } else {
    return Status::InvalidArgument("--db must be sqlite:PATH or postgresql://..., got '" +
                                   std::string(url.substr(0, 64)) + "'");
  }
  if (path.empty())
    return Status::InvalidArgument("--db sqlite: needs a file path (sqlite:gpuhub.db)");
  GPUHUB_ASSIGN_OR_RETURN(
      auto lite, SqliteStore::Open(path, reader ? SqliteStore::Mode::kReader
                                                : SqliteStore::Mode::kDatabase));
  return std::unique_ptr<Store>(std::move(lite));
}

}  // namespace

Result<std::unique_ptr<Store>> OpenStore(std::string_view url) { return Open(url, false); }

Result<std::unique_ptr<Store>> OpenReadStore(std::string_view url) { return Open(url, true); }

}  // namespace gpuhub::store
