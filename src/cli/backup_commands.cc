// `gpuhub admin backup|restore|verify`: backups of a live database (store/backup.h), and the
// check that one can be trusted. They never take the writer lock of a running server's database:
// backup and verify --db run next to it; restore writes only into a new, empty database.
//
//   gpuhub admin backup  --db URL --out FILE [--format gpuhub|pg_dump]
//   gpuhub admin restore --from FILE --db URL      (an empty database; then verified)
//   gpuhub admin verify  FILE | --db URL           (loads it as a fresh engine state and checks
//                                                   every invariant, engine/invariants.h)
//
// Exit codes: 0 ok; 2 bad input (a missing or foreign file, an --out that exists, a non-empty
// restore target); 1 anything else, including a backup whose invariants fail.
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/command_registry.h"
#include "core/clock.h"
#include "core/strings.h"
#include "engine/invariants.h"
#include "engine/market.h"
#include "engine/state.h"
#include "engine/wallets.h"
#include "store/backup.h"
#include "store/postgres/postgres_store.h"
#include "store/store.h"

extern char** environ;

namespace gpuhub::cli {
namespace {

struct BackupOptions {
  std::string db = "sqlite:gpuhub.db";
  std::string out;
  std::string from;
  std::string format = "gpuhub";
  std::string file;
};

bool IsPostgres(const std::string& url) {
  return url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0;
}

void Report(const Status& s) {
  if (s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound ||
      s.code() == StatusCode::kFailedPrecondition) {
    FailBadInput(s.message());
  } else {
    Fail(s.message());
  }
}


std::string RowCounts(const store::BackupSummary& summary) {
  std::string out;
  for (const auto& [table, rows] : summary.rows_by_table) {
    if (rows == 0) continue;
    out += (out.empty() ? "" : ", ") + table + " " + std::to_string(rows);
  }
  return out.empty() ? "no rows" : out;
}

// Runs a PostgreSQL client tool (pg_dump, pg_restore) with `args`; its exit status.
int RunTool(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return 127;
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return 127;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

bool IsPgDumpArchive(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[5] = {};
  in.read(magic, 5);
  return in.gcount() == 5 && std::string(magic, 5) == "PGDMP";
}

// A private scratch directory, removed with the object.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "gpuhub-verify-XXXXXX");
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) != nullptr) path_ = buf.data();
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Loads the database at `url` into a fresh engine state and checks every invariant. The lines it
// prints end with the verdict; false when an invariant fails.
Result<bool> VerifyStore(const std::string& url, const std::string& what) {
  GPUHUB_ASSIGN_OR_RETURN(auto store, store::OpenStore(url));
  GPUHUB_RETURN_IF_ERROR(store->Migrate());
  GPUHUB_ASSIGN_OR_RETURN(auto state, engine::LoadState(*store));
  engine::InvariantReport report = engine::CheckStateInvariants(*state);
  for (const auto& c : report.checks) {
    std::cout << "  " << c.name << (c.status.ok() ? ": ok" : ": FAILED: " + c.status.message())
              << "\n";
  }
  const auto& ledger = state->wallets->ledger;
  const auto& exchange = state->market->exchange;
  std::string last = ledger.Transfers().empty()
                         ? std::string("none")
                         : FormatTimestamp(ledger.Transfers().back().timestamp);
  std::cout << (report.ok() ? "verified: " : "NOT verified: ") << what << ": "
            << std::to_string(static_cast<std::int64_t>(state->accounts.users.size())) << " users, "
            << std::to_string(ledger.LastSequence()) << " ledger transfers (last " << last << "), "
            << exchange.active_lease_count() << " active leases, " << exchange.resting_bid_count()
            << " resting bids, " << exchange.open_ask_count() << " open asks"
            << (report.ok() ? "; every invariant holds" : "; see the FAILED checks above")
            << "\n";
  return report.ok();
}

// Verifies a gpuhub backup file: a copy is upgraded to this binary's schema and loaded, so the
// backup itself is never written.
Result<bool> VerifyBackupFile(const std::string& path, const std::string& label) {
  GPUHUB_ASSIGN_OR_RETURN(store::BackupSummary summary, store::ReadBackupSummary(path));
  std::cout << label << ": " << summary.source << " at "
            << FormatTimestamp(summary.taken_at_us) << ", schema " << summary.schema_version
            << "\n  " << RowCounts(summary) << "\n";
  ScratchDir scratch;
  if (scratch.path().empty()) return Status::Unavailable("cannot create a scratch directory");
  std::string copy = scratch.path() + "/verify.db";
  std::error_code ec;
  std::filesystem::copy_file(path, copy, ec);
  if (ec) return Status::Unavailable("cannot copy " + path + ": " + ec.message());
  return VerifyStore("sqlite:" + copy, label);
}

void Backup(const BackupOptions& o) {
  if (o.out.empty()) return FailBadInput("--out FILE is required");
  if (o.format == "pg_dump") {
    if (!IsPostgres(o.db)) return FailBadInput("--format pg_dump needs a postgresql:// --db");
    if (std::filesystem::exists(o.out)) {
      return FailBadInput("--out " + o.out + " already exists; a backup never overwrites a file");
    }
    int rc = RunTool({"pg_dump", "--format=custom", "--no-owner", "--file=" + o.out,
                      "--dbname=" + o.db});
    if (rc != 0) {
      return Fail("pg_dump failed (exit " + std::to_string(rc) +
                  "); is postgresql-client installed?");
    }
    std::cout << "backed up " << store::RedactPostgresUrl(o.db) << " to " << o.out
              << " with pg_dump (custom format; restore with gpuhub admin restore or pg_restore)\n";
    return;
  }
  if (o.format != "gpuhub") return FailBadInput("--format must be gpuhub or pg_dump");
  RealClock clock;
  auto summary = store::BackupToFile(o.db, o.out, clock.NowMicros());
  if (!summary.ok()) return Report(summary.status());
  std::cout << "backed up " << summary->source << " to " << o.out << " (schema "
            << summary->schema_version << ", snapshot at "
            << FormatTimestamp(summary->taken_at_us) << "): " << RowCounts(*summary) << "\n";
}

void Restore(const BackupOptions& o) {
  if (o.from.empty()) return FailBadInput("--from FILE is required");
  if (!std::filesystem::exists(o.from)) return FailBadInput("no backup file at " + o.from);
  if (IsPgDumpArchive(o.from)) {
    if (!IsPostgres(o.db)) {
      return FailBadInput(o.from + " is a pg_dump archive: restore it into a postgresql:// --db");
    }
    auto target = store::OpenStore(o.db);
    if (!target.ok()) return Report(target.status());
    auto version = (*target)->SchemaVersion();
    if (!version.ok()) return Report(version.status());
    if (*version != 0) {
      return FailBadInput((*target)->Describe() +
                          " is not empty: restore only into a new, empty database");
    }
    target->reset();
    int rc = RunTool({"pg_restore", "--no-owner", "--exit-on-error", "--single-transaction",
                      "--dbname=" + o.db, o.from});
    if (rc != 0) return Fail("pg_restore failed (exit " + std::to_string(rc) + ")");
    std::cout << "restored " << o.from << " into " << store::RedactPostgresUrl(o.db)
              << " with pg_restore\n";
  } else {
    auto summary = store::RestoreFromFile(o.from, o.db);
    if (!summary.ok()) return Report(summary.status());
    std::cout << "restored " << o.from << " (" << summary->source << " at "
              << FormatTimestamp(summary->taken_at_us) << ") into "
              << (IsPostgres(o.db) ? store::RedactPostgresUrl(o.db) : o.db) << ": "
              << RowCounts(*summary) << "\n";
  }
  auto verified = VerifyStore(o.db, "the restored database");
  if (!verified.ok()) return Report(verified.status());
  if (!*verified) Fail("the restored database does not pass its invariant checks");
}

void Verify(const BackupOptions& o) {
  if (o.file.empty() == o.db.empty()) {
    return FailBadInput("verify takes a backup FILE or --db URL (one of them)");
  }
  Result<bool> verified = false;
  if (!o.file.empty()) {
    if (IsPgDumpArchive(o.file)) {
      return FailBadInput(o.file +
                          " is a pg_dump archive: restore it (gpuhub admin restore --from FILE "
                          "--db URL), which verifies the restored database");
    }
    verified = VerifyBackupFile(o.file, "backup " + o.file);
  } else {
    // A live database is verified through a backup: one consistent snapshot, whatever a server
    // writes meanwhile.
    ScratchDir scratch;
    if (scratch.path().empty()) return Fail("cannot create a scratch directory");
    RealClock clock;
    auto summary = store::BackupToFile(o.db, scratch.path() + "/snapshot.db", clock.NowMicros());
    if (!summary.ok()) return Report(summary.status());
    verified = VerifyBackupFile(scratch.path() + "/snapshot.db", "a snapshot of the database");
  }
  if (!verified.ok()) return Report(verified.status());
  if (!*verified) Fail("invariant checks failed");
}

void AddBackupCommands(CLI::App& app) {
  CLI::App* admin = AdminGroup(app);
  auto backup = std::make_shared<BackupOptions>();
  CLI::App* b = admin->add_subcommand(
      "backup", "Back up a database, also while a server runs (docs/operations.md)");
  b->add_option("--db", backup->db, "sqlite:PATH or postgresql://...")
      ->default_str("sqlite:gpuhub.db");
  b->add_option("--out", backup->out, "the backup file to create (never overwritten)")
      ->required();
  b->add_option("--format", backup->format,
                "gpuhub (one SQLite file, any source) or pg_dump (PostgreSQL custom archive)")
      ->default_str("gpuhub");
  b->callback([backup] { Backup(*backup); });

  auto restore = std::make_shared<BackupOptions>();
  CLI::App* r = admin->add_subcommand(
      "restore", "Restore a backup into a new, empty database, then verify it");
  r->add_option("--from", restore->from, "a file made by gpuhub admin backup")->required();
  r->add_option("--db", restore->db, "the empty target: sqlite:PATH or postgresql://...")
      ->required();
  r->callback([restore] { Restore(*restore); });

  auto verify = std::make_shared<BackupOptions>();
  verify->db.clear();
  CLI::App* v = admin->add_subcommand(
      "verify", "Load a backup (or a live database) and check every ledger and market invariant");
  v->add_option("file", verify->file, "a file made by gpuhub admin backup");
  v->add_option("--db", verify->db, "verify a database instead (a consistent snapshot of it)");
  v->callback([verify] { Verify(*verify); });
}

const bool kRegistered = RegisterCommands(&AddBackupCommands);

}  // namespace
}  // namespace gpuhub::cli
