// The server's log sink: one event per line, and a flood of one error is one line and a count.
//
// - Every control character of a message (a libpq error's "\n\t", a CR) is written escaped (\n,
//   \r, \t, \xNN), so each event stays one logfmt line that tools can split on newlines.
// - A warning or error whose text (after escaping) was already written less than `repeat_window`
//   ago is not written again but counted; when its window ends, one line says how many were left
//   out: `event=log_repeated count=N within_s=W message="<the text, quotes escaped>"`. A 2 s
//   database outage that made the engine fail thousands of batches writes each distinct error once
//   plus a summary, not thousands of identical lines. Info lines (requests) are never held back.
//   Windows end on the next log line or flush (serve flushes every second) and at FlushRepeats.
// - Request lines (info lines starting with "event=request ") are kept in memory (at most
//   kMaxBufferedBytes) and written together: when the buffer is full, before any other line (which
//   is written at once, after them, in order), and at every flush (serve flushes every second and
//   at shutdown). One write(2) per request was the largest single cost of a cheap request
//   (bench/http/profile.sh); the price is that a process killed with SIGKILL loses at most a
//   second of request lines, never another event.
// - At most kMaxTrackedRepeats distinct texts are tracked; beyond that the window of the text seen
//   least recently ends early (its summary, if any, is written at once): one-off warnings (a 503
//   request line each) never push out an error that keeps repeating.
//
// Thread-safe (spdlog's base_sink mutex). Time comes from a function so tests can move it.
#pragma once

#include <spdlog/sinks/base_sink.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace gpuhub::http {

// "a\nb" -> "a\\nb": CR, LF, TAB and other control bytes (and DEL) as escapes; the rest unchanged.
std::string EscapeForOneLine(std::string_view text);

class EventLogSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kMaxTrackedRepeats = 1024;
  static constexpr std::size_t kMaxBufferedBytes = 64 * 1024;
  static constexpr std::string_view kBatchedPrefix = "event=request ";
  EventLogSink(std::FILE* out, std::chrono::seconds repeat_window,
               std::function<Clock::time_point()> now = nullptr);
  ~EventLogSink() override;
  // Ends every window now, writing the summaries of those that held lines back (at shutdown).
  void FlushRepeats();

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override;

 private:
  struct Window {
    Clock::time_point ends;
    std::size_t held_back = 0;
    spdlog::level::level_enum level = spdlog::level::warn;
    std::list<const std::string*>::iterator by_end;  // its place in by_end_
    std::list<const std::string*>::iterator by_use;  // its place in by_use_
  };
  void Write(const spdlog::details::log_msg& msg, std::string_view payload);
  // Writes the buffered lines to out_.
  void WriteBuffered();
  // Ends the windows that ended by `now` (all of them when `all`), writing their summaries.
  void EndWindows(Clock::time_point now, bool all);
  void EndWindow(const std::string& text);

  std::FILE* out_;
  spdlog::memory_buf_t buffered_;  // formatted lines not yet written
  std::chrono::seconds repeat_window_;
  std::function<Clock::time_point()> now_;
  std::unordered_map<std::string, Window> windows_;  // by escaped text (keys never move)
  std::list<const std::string*> by_end_;  // keys of windows_, the first to end first
  std::list<const std::string*> by_use_;  // keys of windows_, the most recently seen first
};

}  // namespace gpuhub::http
