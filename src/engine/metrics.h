// A small Prometheus registry: counters and histograms with labels, rendered in the text
// exposition format (version 0.0.4). Shared by the engine (commands, batches, commits) and the
// HTTP layer (requests, latencies).
//
// Thread-safety: every method is thread-safe. References returned by Counter()/Histogram() stay
// valid for the registry's lifetime, so hot paths look a series up once and keep it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace gpuhub::engine {

using Labels = std::vector<std::pair<std::string, std::string>>;

class CounterSeries {
 public:
  void Add(std::uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  std::uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

class HistogramSeries {
 public:
  explicit HistogramSeries(std::vector<double> bounds);
  void Observe(double value);
  const std::vector<double>& bounds() const { return bounds_; }
  // Cumulative counts per bound (Prometheus "le"), then +Inf, the sum and the count.
  void Snapshot(std::vector<std::uint64_t>* cumulative, double* sum, std::uint64_t* count) const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;  // one per bound, plus +Inf
  std::atomic<std::uint64_t> count_{0};
  mutable std::mutex sum_mutex_;
  double sum_ = 0;
};

class MetricsRegistry {
 public:
  CounterSeries& Counter(const std::string& name, const std::string& help,
                         const Labels& labels = {});
  HistogramSeries& Histogram(const std::string& name, const std::string& help,
                             const std::vector<double>& bounds, const Labels& labels = {});
  // A gauge computed at render time (queue depth, open connections).
  void Gauge(const std::string& name, const std::string& help, std::function<double()> read);
  std::string Render() const;

  // Bounds for latencies in seconds: 0.5 ms .. 10 s.
  static std::vector<double> LatencyBounds();
  // Bounds for sizes (commands per batch): 1 .. 1024.
  static std::vector<double> SizeBounds();

 private:
  struct Family {
    std::string help;
    std::string type;  // "counter", "histogram", "gauge"
    std::map<std::string, std::unique_ptr<CounterSeries>> counters;      // by rendered labels
    std::map<std::string, std::unique_ptr<HistogramSeries>> histograms;  // by rendered labels
    std::function<double()> gauge;
  };
  // The family `name`, created with `type` and `help` on first use; a second type is a bug.
  // Called with mutex_ held.
  Family& FamilyOf(const std::string& name, const char* type, const std::string& help);
  mutable std::mutex mutex_;
  std::map<std::string, Family> families_;
};

// Escapes a label value for the exposition format (backslash, quote, newline).
std::string RenderLabels(const Labels& labels);

}  // namespace gpuhub::engine
