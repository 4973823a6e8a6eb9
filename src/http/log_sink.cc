#include "http/log_sink.h"

#include <spdlog/details/log_msg.h>
#include <spdlog/fmt/fmt.h>


namespace gpuhub::http {

namespace {

bool NeedsEscape(char c) {
  auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

// The length of the prefix of `text` that is written as it is.
std::size_t PlainPrefix(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && !NeedsEscape(text[i])) ++i;
  return i;
}

}  // namespace

std::string EscapeForOneLine(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  // Almost every line has nothing to escape: copied in one piece, not byte by byte (the byte loop
  // was the largest part of a request line's cost, bench/http/profile.sh).
  std::size_t plain = PlainPrefix(text);
  out.append(text.substr(0, plain));
  for (char c : text.substr(plain)) {
    auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (NeedsEscape(c)) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
  return out;
}

EventLogSink::EventLogSink(std::FILE* out, std::chrono::seconds repeat_window,
                           std::function<Clock::time_point()> now)
    : out_(out), repeat_window_(repeat_window), now_(std::move(now)) {
  if (!now_) now_ = [] { return Clock::now(); };
}

EventLogSink::~EventLogSink() {
  std::lock_guard<std::mutex> lock(mutex_);
  WriteBuffered();
  std::fflush(out_);
}

void EventLogSink::Write(const spdlog::details::log_msg& msg, std::string_view payload) {
  spdlog::details::log_msg copy = msg;
  copy.payload = spdlog::string_view_t(payload.data(), payload.size());
  formatter_->format(copy, buffered_);
  bool request_line = msg.level < spdlog::level::warn && payload.rfind(kBatchedPrefix, 0) == 0;
  if (!request_line || buffered_.size() >= kMaxBufferedBytes) WriteBuffered();
}

void EventLogSink::WriteBuffered() {
  if (buffered_.size() == 0) return;
  std::fwrite(buffered_.data(), 1, buffered_.size(), out_);
  buffered_.clear();
}

void EventLogSink::EndWindow(const std::string& text) {
  auto it = windows_.find(text);
  if (it == windows_.end()) return;
  Window& w = it->second;
  if (w.held_back > 0) {
    std::string quoted;
    for (char c : it->first) {
      if (c == '"' || c == '\\') quoted += '\\';
      quoted += c;
    }
    std::string summary = fmt::format("event=log_repeated count={} within_s={} message=\"{}\"",
                                      w.held_back, repeat_window_.count(), quoted);
    spdlog::details::log_msg msg(spdlog::string_view_t("gpuhub"), w.level,
                                 spdlog::string_view_t(summary.data(), summary.size()));
    Write(msg, summary);
  }
  by_end_.erase(w.by_end);
  by_use_.erase(w.by_use);
  windows_.erase(it);
}

void EventLogSink::EndWindows(Clock::time_point now, bool all) {
  // Windows are opened with the same length, so by_end_ is also the order in which they end.
  while (!by_end_.empty() && (all || windows_.at(*by_end_.front()).ends <= now)) {
    EndWindow(*by_end_.front());
  }
}

void EventLogSink::sink_it_(const spdlog::details::log_msg& msg) {
  Clock::time_point now = now_();
  EndWindows(now, /*all=*/false);
  std::string_view payload(msg.payload.data(), msg.payload.size());
  if (msg.level < spdlog::level::warn && PlainPrefix(payload) == payload.size()) {
    return Write(msg, payload);  // a request line: nothing to escape, nothing to count
  }
  std::string text = EscapeForOneLine(payload);
  if (msg.level >= spdlog::level::warn) {
    auto it = windows_.find(text);
    if (it != windows_.end()) {
      ++it->second.held_back;
      by_use_.splice(by_use_.begin(), by_use_, it->second.by_use);
      return;
    }
    if (windows_.size() >= kMaxTrackedRepeats) EndWindow(*by_use_.back());
    auto [added, inserted] = windows_.emplace(text, Window{now + repeat_window_, 0, msg.level});
    (void)inserted;
    const std::string* key = &added->first;
    added->second.by_end = by_end_.insert(by_end_.end(), key);
    added->second.by_use = by_use_.insert(by_use_.begin(), key);
  }
  Write(msg, text);
}

void EventLogSink::flush_() {
  EndWindows(now_(), /*all=*/false);
  WriteBuffered();
  std::fflush(out_);
}

void EventLogSink::FlushRepeats() {
  std::lock_guard<std::mutex> lock(mutex_);
  EndWindows(now_(), /*all=*/true);
  WriteBuffered();
  std::fflush(out_);
}

}  // namespace gpuhub::http
