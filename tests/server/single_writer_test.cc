// One engine writes a database: a second `gpuhub serve` on the same database is a standby, or with
// `[ha] standby = false` refuses to start; through another path to the same SQLite file it refuses
// in any case. A real server process and real SQLite files.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "harness.h"

namespace gpuhub::testing {
namespace {

bool StartsOn(const TempDir& dir, const std::string& db, std::string* log,
              const std::string& config_extra = "") {
  ServerOptions options;
  options.db = db;
  options.config_extra = config_extra;
  ServerProcess server(dir, options);
  bool started = server.Start();
  *log = server.Log();
  return started;
}

TEST(SingleWriterTest, ASecondServerOnTheSameDatabaseRefusesToStartWhenStandbyIsOff) {
  TempDir dir;
  ServerOptions options;
  options.db = FreshDatabaseUrl("sqlite", dir);
  ServerProcess first(dir, options);
  ASSERT_TRUE(first.Start()) << first.Log();
  std::string log;
  EXPECT_FALSE(StartsOn(dir, options.db, &log, "[ha]\nstandby = false\n"));
  EXPECT_NE(log.find("in use"), std::string::npos) << log;
}

// The lock used to be a sidecar file named after the path, so a symlink or a hard link to the
// same SQLite file started a second writer (two engines each with their own state in memory,
// committing over each other). The file itself is locked now, and such a server is not even a
// standby (SQLite's WAL is named after the path: a takeover there would miss the writer's frames).
TEST(SingleWriterTest, ASymlinkOrAHardLinkToTheSameSqliteFileIsRefusedToo) {
  TempDir dir;
  const std::string file = dir.path() + "/gpuhub.db";
  std::filesystem::create_directories(dir.path() + "/elsewhere");
  ServerOptions options;
  options.db = "sqlite:" + file;
  ServerProcess first(dir, options);
  ASSERT_TRUE(first.Start()) << first.Log();
  std::filesystem::create_symlink(file, dir.path() + "/elsewhere/symlink.db");
  std::filesystem::create_hard_link(file, dir.path() + "/elsewhere/hardlink.db");
  for (const char* link : {"/elsewhere/symlink.db", "/elsewhere/hardlink.db"}) {
    std::string log;
    EXPECT_FALSE(StartsOn(dir, "sqlite:" + dir.path() + link, &log)) << link << " started";
    EXPECT_NE(log.find("in use by another gpuhub engine through another path"), std::string::npos)
        << link << ": " << log;
  }
  // The first still serves, and its data is one database: once it stops, the link opens it.
  HttpClient client(first.port());
  ASSERT_FALSE(SignUpAndLogIn(client, "linda").empty());
  ASSERT_EQ(first.Terminate(), 0) << first.Log();
  ServerOptions via_link;
  via_link.db = "sqlite:" + dir.path() + "/elsewhere/hardlink.db";
  ServerProcess second(dir, via_link);
  ASSERT_TRUE(second.Start()) << second.Log();
  HttpClient again(second.port());
  EXPECT_FALSE(LogIn(again, "linda").empty());
}

}  // namespace
}  // namespace gpuhub::testing
