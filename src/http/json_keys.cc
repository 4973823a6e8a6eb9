#include "http/json_keys.h"

#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <vector>

namespace gpuhub::http {
namespace {

using Json = nlohmann::json;

// Objects with at most this many names are searched by a scan (most request bodies: no hashing,
// no allocation beyond the names); a larger one moves its names into a hash set.
constexpr std::size_t kScannedNames = 16;

class DuplicateKeyFinder : public nlohmann::json_sax<Json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    if (depth_ == objects_.size()) objects_.emplace_back();
    Names& names = objects_[depth_++];
    names.scanned.clear();
    names.hashed.clear();
    return true;
  }
  bool key(string_t& name) override {
    // Keys only come directly inside the innermost open object.
    Names& names = objects_[depth_ - 1];
    if (names.hashed.empty()) {
      for (const auto& seen : names.scanned) {
        if (seen == name) return Found(name);
      }
      names.scanned.push_back(name);
      if (names.scanned.size() > kScannedNames) {
        names.hashed.insert(names.scanned.begin(), names.scanned.end());
      }
      return true;
    }
    if (!names.hashed.insert(name).second) return Found(name);
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

  const std::string* duplicate() const { return found_ ? &duplicate_ : nullptr; }

 private:
  struct Names {
    std::vector<std::string> scanned;
    std::unordered_set<std::string> hashed;
  };
  bool Found(const std::string& name) {
    found_ = true;
    duplicate_ = name;
    return false;
  }
  std::vector<Names> objects_;
  std::size_t depth_ = 0;
  bool found_ = false;
  std::string duplicate_;
};

}  // namespace

Status CheckNoDuplicateKeys(std::string_view text) {
  if (text.find('{') == std::string_view::npos) return Status::Ok();  // no object, no name
  DuplicateKeyFinder finder;
  Json::sax_parse(text.begin(), text.end(), &finder, nlohmann::detail::input_format_t::json,
                  /*strict=*/true);
  const std::string* name = finder.duplicate();
  if (!name) return Status::Ok();
  std::string shown = name->substr(0, 64);
  return Status::InvalidArgument("field '" + shown +
                                 "' is given more than once in the request body")
      .WithField(shown);
}

}  // namespace gpuhub::http
