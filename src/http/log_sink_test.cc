#include "http/log_sink.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace gpuhub::http {
namespace {

// A logger over an EventLogSink writing to a memory file, with a clock the test moves.
class EventLogSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = std::tmpfile();
    ASSERT_NE(out_, nullptr);
    sink_ = std::make_shared<EventLogSink>(out_, std::chrono::seconds(10), [this] { return now_; });
    logger_ = std::make_shared<spdlog::logger>("test", sink_);
    logger_->set_pattern("level=%l %v");
    logger_->set_level(spdlog::level::info);
  }
  void TearDown() override { std::fclose(out_); }
  std::vector<std::string> Lines() {
    logger_->flush();
    std::fflush(out_);
    std::rewind(out_);
    std::string text;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, out_)) > 0) text.append(buf, n);
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  std::FILE* out_ = nullptr;
  EventLogSink::Clock::time_point now_{};
  std::shared_ptr<EventLogSink> sink_;
  std::shared_ptr<spdlog::logger> logger_;
};

TEST(EscapeForOneLineTest, ControlCharactersBecomeEscapes) {
  EXPECT_EQ(EscapeForOneLine("plain \"text\" = ok"), "plain \"text\" = ok");
  EXPECT_EQ(EscapeForOneLine("server closed the connection\n\tThis probably means\r\n"),
            "server closed the connection\\n\\tThis probably means\\r\\n");
  EXPECT_EQ(EscapeForOneLine(std::string("a\0b\x1b\x7f", 5)), "a\\x00b\\x1b\\x7f");
  EXPECT_EQ(EscapeForOneLine("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 stays
  EXPECT_EQ(EscapeForOneLine("\nfirst"), "\\nfirst");  // before, after, and without a plain run
  EXPECT_EQ(EscapeForOneLine("last\x01"), "last\\x01");
  EXPECT_EQ(EscapeForOneLine("\t"), "\\t");
  EXPECT_EQ(EscapeForOneLine(""), "");
}

// libpq's messages span lines ("...\n\tThis probably means the server terminated abnormally\n"):
// written as they came they broke one-event-per-line logging.
TEST_F(EventLogSinkTest, EveryEventIsOneLine) {
  logger_->error("event=commit_failed error=\"server closed the connection unexpectedly\n\tThis "
                 "probably means the server terminated abnormally\n\"");
  logger_->info("event=request path=\"/a\rb\"");
  auto lines = Lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "level=error event=commit_failed error=\"server closed the connection "
            "unexpectedly\\n\\tThis probably means the server terminated abnormally\\n\"");
  EXPECT_EQ(lines[1], "level=info event=request path=\"/a\\rb\"");
}

TEST_F(EventLogSinkTest, RepeatedErrorsAreWrittenOnceAndCountedWhenTheirWindowEnds) {
  for (int i = 0; i < 3544; ++i) {
    logger_->error("event=state_reload_failed error=\"connection refused\"");
    logger_->info("event=request status=503 n={}", i % 3);  // info lines are never held back
    logger_->warn("event=other");
  }
  auto during = Lines();
  EXPECT_EQ(during.size(), 2u + 3544u);
  EXPECT_EQ(during[0], "level=error event=state_reload_failed error=\"connection refused\"");
  EXPECT_EQ(during[2], "level=warning event=other");
  // The window ends (a flush or any line after 10 s): one summary per held-back text.
  now_ += std::chrono::seconds(10);
  logger_->flush();
  auto after = Lines();
  ASSERT_EQ(after.size(), 2u + 3544u + 2u);
  std::vector<std::string> summaries(after.end() - 2, after.end());
  std::sort(summaries.begin(), summaries.end());
  EXPECT_EQ(summaries[0],
            "level=error event=log_repeated count=3543 within_s=10 "
            "message=\"event=state_reload_failed error=\\\"connection refused\\\"\"");
  EXPECT_EQ(summaries[1], "level=warning event=log_repeated count=3543 within_s=10 "
                          "message=\"event=other\"");
  // A new window: written again, then held back again.
  logger_->error("event=state_reload_failed error=\"connection refused\"");
  logger_->error("event=state_reload_failed error=\"connection refused\"");
  EXPECT_EQ(Lines().size(), after.size() + 1);
  sink_->FlushRepeats();  // at exit: the open window's count is written at once
  auto last = Lines();
  ASSERT_EQ(last.size(), after.size() + 2);
  EXPECT_NE(last.back().find("event=log_repeated count=1 "), std::string::npos) << last.back();
}

TEST_F(EventLogSinkTest, AWindowWithoutRepeatsEndsSilentlyAndTrackingIsBounded) {
  logger_->error("event=once");
  now_ += std::chrono::seconds(11);
  logger_->flush();
  EXPECT_EQ(Lines().size(), 1u);
  // Many distinct errors: at most kMaxTrackedRepeats windows; the oldest ends early.
  for (std::size_t i = 0; i < EventLogSink::kMaxTrackedRepeats + 5; ++i) {
    logger_->error("event=distinct n={}", i);
    logger_->error("event=distinct n={}", i);
    now_ += std::chrono::milliseconds(1);
  }
  auto lines = Lines();
  std::size_t summaries = 0;
  for (const auto& l : lines) summaries += l.find("event=log_repeated") != std::string::npos;
  EXPECT_EQ(summaries, 5u);  // the 5 oldest windows ended early, with their one repeat each
}

// During an outage every failed request also logs a warning line of its own (distinct request
// ids): thousands of one-off texts must not push the repeating error out of tracking.
TEST_F(EventLogSinkTest, OneOffWarningsNeverPushOutAnErrorThatKeepsRepeating) {
  for (int i = 0; i < 5000; ++i) {
    logger_->error("event=state_reload_failed error=\"connection refused\"");
    logger_->warn("event=request request_id={} status=503", i);
  }
  now_ += std::chrono::seconds(10);
  logger_->flush();
  std::size_t reload = 0, summaries = 0;
  for (const auto& l : Lines()) {
    reload += l.rfind("level=error event=state_reload_failed", 0) == 0;
    summaries += l.find("count=4999 within_s=10 message=\"event=state_reload_failed") !=
                 std::string::npos;
  }
  EXPECT_EQ(reload, 1u);
  EXPECT_EQ(summaries, 1u);
}

// Request lines are written together (one write per second, not one per request); any other
// line (a warning, an info event such as a credited payment) is written at once with the request
// lines before it, in order; the buffer never holds more than its bound.
TEST_F(EventLogSinkTest, RequestLinesAreBufferedUntilAFlushAnotherEventOrAFullBuffer) {
  auto written = [this] {
    std::fflush(out_);
    return static_cast<long>(std::ftell(out_));
  };
  logger_->info("event=request n=1");
  logger_->info("event=request n=2");
  EXPECT_EQ(written(), 0) << "info lines are held until a flush";
  logger_->warn("event=slow n=3");
  long after_warning = written();
  EXPECT_GT(after_warning, 0);
  logger_->info("event=request n=4");
  EXPECT_EQ(written(), after_warning);
  logger_->info("event=payment_credited n=5");
  long after_event = written();
  EXPECT_GT(after_event, after_warning) << "other info events are written at once";
  after_warning = after_event;
  // More than the bound in info lines: written without a flush, never all held.
  std::string filler(200, 'x');
  std::size_t lines_in_bound = EventLogSink::kMaxBufferedBytes / filler.size() + 2;
  for (std::size_t i = 0; i < lines_in_bound; ++i) logger_->info("event=request f={}", filler);
  EXPECT_GT(written(), after_warning + static_cast<long>(EventLogSink::kMaxBufferedBytes) / 2);
  auto lines = Lines();
  ASSERT_EQ(lines.size(), 5 + lines_in_bound);
  EXPECT_EQ(lines[0], "level=info event=request n=1");
  EXPECT_EQ(lines[1], "level=info event=request n=2");
  EXPECT_EQ(lines[2], "level=warning event=slow n=3");
  EXPECT_EQ(lines[3], "level=info event=request n=4");
  EXPECT_EQ(lines[4], "level=info event=payment_credited n=5");
}

}  // namespace
}  // namespace gpuhub::http
