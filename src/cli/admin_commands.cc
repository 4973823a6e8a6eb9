// `gpuhub admin ...`: operator verbs that work on the database directly, while no server runs on
// it (they take the engine's writer lock, so they refuse to run next to a live server).
//
//   gpuhub admin create-user --username U --role admin [--db URL] [--password-file F]
//   gpuhub admin grant-role  --username U --role admin [--db URL]
//
// The password is read from --password-file or standard input (first line), never from a flag:
// flags end up in shell history and in `ps`.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "cli/command_registry.h"
#include "cli/rental_commands.h"
#include "core/clock.h"
#include "engine/accounts.h"
#include "engine/audit_log.h"
#include "engine/engine.h"
#include "http/config.h"
#include "store/store.h"

namespace gpuhub::cli {
namespace {

struct AdminOptions {
  std::string db = "sqlite:gpuhub.db";
  std::string username;
  std::string role = "admin";
  std::string password_file;
  std::string config_path;
};

Result<std::unique_ptr<engine::Engine>> OpenEngine(const std::string& db, const Clock& clock,
                                                   engine::MetricsRegistry& metrics) {
  GPUHUB_ASSIGN_OR_RETURN(auto store, store::OpenStore(db));
  GPUHUB_RETURN_IF_ERROR(store->AcquireWriterLock());
  GPUHUB_RETURN_IF_ERROR(store->Migrate());
  engine::EngineOptions options;
  options.run_periodic_ticks = false;
  auto engine = std::make_unique<engine::Engine>(std::move(store), clock, metrics, options);
  GPUHUB_RETURN_IF_ERROR(engine->Start());
  return engine;
}

Result<std::string> ReadPassword(const std::string& file) {
  std::string password;
  if (!file.empty()) {
    std::ifstream in(file);
    if (!in) return Status::InvalidArgument("cannot read --password-file " + file);
    std::getline(in, password);
  } else {
    if (::isatty(STDIN_FILENO)) std::cerr << "password for the new user: " << std::flush;
    if (!std::getline(std::cin, password)) {
      return Status::InvalidArgument("no password on standard input (or use --password-file)");
    }
  }
  if (!password.empty() && password.back() == '\r') password.pop_back();
  GPUHUB_RETURN_IF_ERROR(engine::ValidatePassword(password));
  return password;
}

void Report(const Status& s) {
  if (s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kConflict ||
      s.code() == StatusCode::kNotFound) {
    FailBadInput(s.message());
  } else {
    Fail(s.message());
  }
}

void CreateUser(const AdminOptions& o) {
  auto role = engine::ParseRole(o.role);
  if (!role.ok()) return FailBadInput(role.status().message());
  auto name = engine::CanonicalUsername(o.username);
  if (!name.ok()) return FailBadInput(name.status().message());
  http::ServiceConfig config;
  if (!o.config_path.empty()) {
    auto loaded = http::LoadServiceConfig(o.config_path);
    if (!loaded.ok()) return FailBadInput(loaded.status().message());
    config = *loaded;
  }
  auto password = ReadPassword(o.password_file);
  if (!password.ok()) return FailBadInput(password.status().message());
  auto hash = engine::HashPassword(*password, config.hashing);
  if (!hash.ok()) return Report(hash.status());
  RealClock clock;
  engine::MetricsRegistry metrics;
  auto engine = OpenEngine(o.db, clock, metrics);
  if (!engine.ok()) return Report(engine.status());
  std::uint32_t roles = *role;
  auto user = (*engine)->ExecuteSync<engine::User>(
      [&](engine::Txn& txn) { return engine::CreateUser(txn, *name, *hash, roles); });
  (*engine)->Stop();
  if (!user.ok()) return Report(user.status());
  std::cout << "created user " << user->username << " (id " << user->id << ", roles";
  for (const auto& r : engine::RoleNames(user->roles)) std::cout << " " << r;
  std::cout << ")\n";
}

void GrantRole(const AdminOptions& o) {
  auto role = engine::ParseRole(o.role);
  if (!role.ok()) return FailBadInput(role.status().message());
  auto name = engine::CanonicalUsername(o.username);
  if (!name.ok()) return FailBadInput(name.status().message());
  RealClock clock;
  engine::MetricsRegistry metrics;
  auto engine = OpenEngine(o.db, clock, metrics);
  if (!engine.ok()) return Report(engine.status());
  auto user = (*engine)->ExecuteSync<engine::User>([&](engine::Txn& txn) -> Result<engine::User> {
    const engine::User* u = engine::FindUserByName(txn.state, *name);
    if (!u) return Status::NotFound("no user '" + *name + "'");
    const std::uint32_t before = u->roles;
    GPUHUB_ASSIGN_OR_RETURN(engine::User granted, engine::GrantRoles(txn, u->id, *role));
    if (granted.roles != before) {
      // The operator at the console: the log's actor "system" (no origin).
      engine::RecordAudit(txn, granted.id, engine::AuditKind::kRoleChanged,
                          {{"granted", engine::RoleNames(*role)},
                           {"roles", engine::RoleNames(granted.roles)},
                           {"via", "gpuhub admin grant-role"}});
    }
    return granted;
  });
  (*engine)->Stop();
  if (!user.ok()) return Report(user.status());
  std::cout << "user " << user->username << " now has roles";
  for (const auto& r : engine::RoleNames(user->roles)) std::cout << " " << r;
  std::cout << "\n";
}

void AddAdminCommands(CLI::App& app) {
  CLI::App* admin = AdminGroup(app);
  AddAdminNodeCommands(admin);
  AddAdminStorageHostCommands(admin);
  auto create = std::make_shared<AdminOptions>();
  CLI::App* c = admin->add_subcommand("create-user",
                                      "Create a user (password from stdin or --password-file)");
  c->add_option("--username", create->username, "user name")->required();
  c->add_option("--role", create->role, "customer, provider or admin")->default_str("admin");
  c->add_option("--db", create->db, "sqlite:PATH or postgresql://...")
      ->default_str("sqlite:gpuhub.db");
  c->add_option("--password-file", create->password_file, "read the password from this file");
  c->add_option("--config", create->config_path, "config file (for the Argon2id work factor)");
  c->callback([create] { CreateUser(*create); });

  auto grant = std::make_shared<AdminOptions>();
  CLI::App* g = admin->add_subcommand("grant-role", "Give an existing user a role");
  g->add_option("--username", grant->username, "user name")->required();
  g->add_option("--role", grant->role, "customer, provider or admin")->required();
  g->add_option("--db", grant->db, "sqlite:PATH or postgresql://...")
      ->default_str("sqlite:gpuhub.db");
  g->callback([grant] { GrantRole(*grant); });
}

const bool kRegistered = RegisterCommands(&AddAdminCommands);

}  // namespace

CLI::App* AdminGroup(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App* a) { return a->get_name() == "admin"; })) {
    return sub;
  }
  CLI::App* admin = app.add_subcommand(
      "admin",
      "Operator commands: create-user and grant-role work on the database while the server is "
      "stopped; backup, restore and verify at any time; nodes and storage-hosts talk to a running server");
  admin->require_subcommand(1);
  return admin;
}
}  // namespace gpuhub::cli
