#include "engine/metrics.h"

#include <charconv>

#include "core/status.h"

namespace gpuhub::engine {

HistogramSeries::HistogramSeries(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<std::uint64_t>[bounds_.size() + 1]) {
  for (std::size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0);
}

void HistogramSeries::Observe(double value) {
  std::size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(sum_mutex_);
  sum_ += value;
}

void HistogramSeries::Snapshot(std::vector<std::uint64_t>* cumulative, double* sum,
                               std::uint64_t* count) const {
  cumulative->clear();
  std::uint64_t running = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    cumulative->push_back(running);
  }
  {
    std::lock_guard<std::mutex> lock(sum_mutex_);
    *sum = sum_;
  }
  *count = running;
}

std::string RenderLabels(const Labels& labels) {
  std::string out;
  for (const auto& [name, value] : labels) {
    if (!out.empty()) out += ",";
    out += name + "=\"";
    for (char c : value) {
      if (c == '\\')
        out += "\\\\";
      else if (c == '"')
        out += "\\\"";
      else if (c == '\n')
        out += "\\n";
      else
        out += c;
    }
    out += "\"";
  }
  return out;
}

MetricsRegistry::Family& MetricsRegistry::FamilyOf(const std::string& name, const char* type,
                                                   const std::string& help) {
  Family& family = families_[name];
  if (family.type.empty()) {
    family.type = type;
    family.help = help;
  }
  GPUHUB_CHECK_MSG(family.type == type, "metric registered with two types");
  return family;
}

CounterSeries& MetricsRegistry::Counter(const std::string& name, const std::string& help,
                                        const Labels& labels) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& series = FamilyOf(name, "counter", help).counters[RenderLabels(labels)];
  if (!series) series = std::make_unique<CounterSeries>();
  return *series;
}

HistogramSeries& MetricsRegistry::Histogram(const std::string& name, const std::string& help,
                                            const std::vector<double>& bounds,
                                            const Labels& labels) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& series = FamilyOf(name, "histogram", help).histograms[RenderLabels(labels)];
  if (!series) series = std::make_unique<HistogramSeries>(bounds);
  return *series;
}

void MetricsRegistry::Gauge(const std::string& name, const std::string& help,
                            std::function<double()> read) {
  std::lock_guard<std::mutex> lock(mutex_);
  Family& family = families_[name];
  family.type = "gauge";
  family.help = help;
  family.gauge = std::move(read);
}

namespace {
std::string Number(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest exact form: 0.1, 2.5
  return ec == std::errc() ? std::string(buf, end) : std::string("NaN");
}
// "{labels}", or "" for none.
std::string Braced(const std::string& labels) { return labels.empty() ? "" : "{" + labels + "}"; }
std::string WithLabel(const std::string& labels, const std::string& extra) {
  return Braced(labels.empty() ? extra : labels + "," + extra);
}
}  // namespace

std::string MetricsRegistry::Render() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  for (const auto& [name, family] : families_) {
    out += "# HELP " + name + " " + family.help + "\n";
    out += "# TYPE " + name + " " + family.type + "\n";
    if (family.type == "gauge") {
      out += name + " " + Number(family.gauge ? family.gauge() : 0) + "\n";
    }
    for (const auto& [labels, series] : family.counters) {
      out += name + Braced(labels) + " " + std::to_string(series->value()) + "\n";
    }
    std::vector<std::uint64_t> cumulative;
    for (const auto& [labels, series] : family.histograms) {
      double sum = 0;
      std::uint64_t count = 0;
      series->Snapshot(&cumulative, &sum, &count);
      for (std::size_t i = 0; i < series->bounds().size(); ++i) {
        out += name + "_bucket" + WithLabel(labels, "le=\"" + Number(series->bounds()[i]) + "\"") +
               " " + std::to_string(cumulative[i]) + "\n";
      }
      out += name + "_bucket" + WithLabel(labels, "le=\"+Inf\"") + " " +
             std::to_string(cumulative.back()) + "\n";
      out += name + "_sum" + Braced(labels) + " " + Number(sum) + "\n";
      out += name + "_count" + Braced(labels) + " " + std::to_string(count) + "\n";
    }
  }
  return out;
}

std::vector<double> MetricsRegistry::LatencyBounds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

std::vector<double> MetricsRegistry::SizeBounds() {
  return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
}

}  // namespace gpuhub::engine
