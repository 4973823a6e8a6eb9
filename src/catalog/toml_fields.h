// How the catalog's TOML is read, shared by catalog.cc and card_specs.cc: errors that say where
// ("<file>:<line>: <what> field '<f>': <message>"), typed field access that refuses unknown keys,
// and the walk over an array of tables. Internal to src/catalog.
#pragma once

#include <toml++/toml.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "core/money.h"
#include "core/status.h"
#include "core/strings.h"

namespace gpuhub::catalog {

// Where an error happened: "<file>:<line>: <what> <field>: <message>".
class Where {
 public:
  Where(std::string_view source, std::string what, int table_line)
      : source_(source), what_(std::move(what)), table_line_(table_line) {}
  void set_what(std::string what) { what_ = std::move(what); }

  Status Error(const toml::node* node, std::string_view field, std::string_view message) const {
    int line = node != nullptr && node->source().begin.line > 0
                   ? static_cast<int>(node->source().begin.line)
                   : table_line_;
    std::string out = std::string(source_) + ":" + std::to_string(line) + ": " + what_;
    if (!field.empty()) out += (what_.empty() ? "field '" : " field '") + std::string(field) + "'";
    out += ": ";
    out += message;
    return Status::InvalidArgument(std::move(out));
  }
  int table_line() const { return table_line_; }

 private:
  std::string_view source_;
  std::string what_;
  int table_line_;
};

inline std::string Quote(std::string_view s) { return "\"" + std::string(s.substr(0, 64)) + "\""; }

// Describes a TOML value for error messages.
inline std::string Describe(const toml::node& node) {
  if (auto s = node.value<std::string>()) return "the string " + Quote(*s);
  if (node.is_integer()) return "the integer " + std::to_string(node.as_integer()->get());
  if (node.is_floating_point())
    return "the float " + FormatFixed(node.as_floating_point()->get(), 4);
  if (node.is_boolean()) return node.as_boolean()->get() ? "true" : "false";
  if (node.is_array()) return "an array";
  if (node.is_table()) return "a table";
  return "a date/time";
}

// Reads the fields of one table, refusing unknown keys and remembering which were read.
class Fields {
 public:
  Fields(const toml::table& table, const Where& where) : table_(table), where_(where) {}

  const toml::node* Find(std::string_view key) {
    known_.insert(std::string(key));
    return table_.get(key);
  }

  Status UnknownKeys() const {
    for (const auto& [key, node] : table_) {
      if (!known_.count(std::string(key.str()))) {
        std::string list;
        for (const auto& k : known_) list += (list.empty() ? "" : ", ") + k;
        return where_.Error(&node, key.str(), "unknown field (known fields: " + list + ")");
      }
    }
    return Status::Ok();
  }

  Result<std::string> String(std::string_view key, bool required = true,
                             std::string fallback = "") {
    const toml::node* node = Find(key);
    if (node == nullptr) {
      if (required) return where_.Error(nullptr, key, "is missing");
      return fallback;
    }
    auto value = node->value<std::string>();
    if (!value) return where_.Error(node, key, "must be a string, got " + Describe(*node));
    std::string_view trimmed = Trim(*value);
    if (trimmed.empty()) return where_.Error(node, key, "must not be empty");
    if (trimmed.size() > 200) return where_.Error(node, key, "is longer than 200 characters");
    return std::string(trimmed);
  }

  Result<bool> Bool(std::string_view key, bool required, bool fallback = false) {
    const toml::node* node = Find(key);
    if (node == nullptr) {
      if (required) return where_.Error(nullptr, key, "is missing (true or false)");
      return fallback;
    }
    if (!node->is_boolean()) {
      return where_.Error(node, key, "must be true or false, got " + Describe(*node));
    }
    return node->as_boolean()->get();
  }

  Result<std::int64_t> Integer(std::string_view key, bool required, std::int64_t min,
                               std::int64_t max, std::int64_t fallback = 0) {
    const toml::node* node = Find(key);
    if (node == nullptr) {
      if (required) return where_.Error(nullptr, key, "is missing");
      return fallback;
    }
    return IntegerValue(node, key, min, max);
  }

  Result<std::int64_t> IntegerValue(const toml::node* node, std::string_view key, std::int64_t min,
                                    std::int64_t max) const {
    if (!node->is_integer()) {
      return where_.Error(node, key, "must be a whole number, got " + Describe(*node));
    }
    std::int64_t v = node->as_integer()->get();
    if (v < min || v > max) {
      return where_.Error(node, key,
                          "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                              ", got " + std::to_string(v));
    }
    return v;
  }

  // A positive number (integer or float). With `allow_unpublished`, the string "not published" is
  // accepted and returned as nullopt.
  Result<std::optional<double>> Number(std::string_view key, double max, bool allow_unpublished) {
    const toml::node* node = Find(key);
    std::string hint = allow_unpublished ? " (a positive number or \"not published\")" : "";
    if (node == nullptr) return where_.Error(nullptr, key, "is missing" + hint);
    if (auto s = node->value<std::string>()) {
      if (allow_unpublished && *s == "not published") return std::optional<double>();
      return where_.Error(node, key,
                          "must be a positive number" + hint + ", got " + Describe(*node));
    }
    double v = 0;
    if (node->is_integer()) {
      v = static_cast<double>(node->as_integer()->get());
    } else if (node->is_floating_point()) {
      v = node->as_floating_point()->get();
    } else {
      return where_.Error(node, key,
                          "must be a positive number" + hint + ", got " + Describe(*node));
    }
    if (!std::isfinite(v) || v <= 0 || v > max) {
      return where_.Error(
          node, key,
          "must be a positive number up to " + FormatFixed(max, 0) + ", got " + Describe(*node));
    }
    return std::optional<double>(v);
  }

  // Money as a decimal string ("1490.50") or a whole number; never a float (it would not be exact).
  Result<std::optional<std::int64_t>> Usd(std::string_view key, bool required,
                                          bool allow_unpublished) {
    const toml::node* node = Find(key);
    if (node == nullptr) {
      if (required) return where_.Error(nullptr, key, "is missing (a price like \"1490.50\")");
      return std::optional<std::int64_t>();
    }
    std::string text;
    if (node->is_integer()) {
      if (node->as_integer()->get() < 0) {
        return where_.Error(node, key, "must not be negative, got " + Describe(*node));
      }
      text = std::to_string(node->as_integer()->get());
    } else if (auto s = node->value<std::string>()) {
      if (allow_unpublished && *s == "not published") return std::optional<std::int64_t>();
      text = *s;
    } else if (node->is_floating_point()) {
      return where_.Error(node, key,
                          "write prices as decimal strings (\"" +
                              FormatFixed(node->as_floating_point()->get(), 2) +
                              "\") so they stay exact, not as a TOML float");
    } else {
      return where_.Error(node, key, "must be a price like \"1490.50\", got " + Describe(*node));
    }
    auto micros = ParseDecimalMicros(text, 6);
    if (!micros.ok()) return where_.Error(node, key, micros.status().message());
    if (*micros <= 0)
      return where_.Error(node, key, "must be a positive price, got " + Quote(text));
    return std::optional<std::int64_t>(*micros);
  }

 private:
  const toml::table& table_;
  const Where& where_;
  std::set<std::string> known_;
};

inline int LineOf(const toml::node& node) {
  return node.source().begin.line > 0 ? static_cast<int>(node.source().begin.line) : 1;
}

// Visits each table of an array of tables (`[[key]]`), refusing anything else under that key.
template <typename Fn>
Status ForEachTable(const toml::table& root, std::string_view key, std::string_view source,
                    std::size_t max_count, Fn&& fn) {
  const toml::node* node = root.get(key);
  if (node == nullptr) return Status::Ok();
  Where where(source, "", LineOf(*node));
  const toml::array* array = node->as_array();
  if (array == nullptr) {
    return where.Error(node, key, "must be an array of tables ([[" + std::string(key) + "]])");
  }
  if (array->size() > max_count) {
    return where.Error(node, key, "has more than " + std::to_string(max_count) + " entries");
  }
  for (std::size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = *array->get(i);
    const toml::table* table = element.as_table();
    if (table == nullptr) {
      return where.Error(&element, key, "entry " + std::to_string(i + 1) + " must be a table");
    }
    GPUHUB_RETURN_IF_ERROR(fn(*table, i));
  }
  return Status::Ok();
}

struct Catalog;
// The [[card_specs]] tables (card_specs.cc), after the cards they name.
Status ParseCardSpecs(const toml::table& root, std::string_view source, Catalog& catalog);

}  // namespace gpuhub::catalog
