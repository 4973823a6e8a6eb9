#include "agent/process.h"

#include <gtest/gtest.h>

#include "agent/test_util.h"

namespace gpuhub::agent {
namespace {

TEST(ProcessTest, RunsWithArgvNotAShell) {
  auto r = RunProcess({"printf", "%s|", "a b", "$(echo x)", ";rm"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_text, "a b|$(echo x)|;rm|") << "arguments reach the program verbatim";
}

TEST(ProcessTest, ExitCodesStderrAndStdin) {
  auto r = RunProcess({"sh", "-c", "echo oops >&2; exit 3"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->stderr_text, "oops\n");
  EXPECT_EQ(DescribeFailure({"sh"}, *r), "sh exited 3: oops");
  auto cat = RunProcess({"cat"}, kToolTimeout, "fed through stdin");
  ASSERT_TRUE(cat.ok());
  EXPECT_EQ(cat->stdout_text, "fed through stdin");
}

TEST(ProcessTest, MissingProgramTimeoutAndFlood) {
  EXPECT_EQ(RunProcess({"/nonexistent/nvidia-smi"}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(RunProcess({"no-such-program-gpuhub"}).status().code(), StatusCode::kNotFound);
  auto start = std::chrono::steady_clock::now();
  auto slow = RunProcess({"sleep", "10"}, std::chrono::milliseconds(200));
  EXPECT_EQ(slow.status().code(), StatusCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "killed";
  auto flood = RunProcess({"yes"});
  EXPECT_EQ(flood.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(flood.status().message().find("too much output"), std::string::npos);
}

}  // namespace
}  // namespace gpuhub::agent
