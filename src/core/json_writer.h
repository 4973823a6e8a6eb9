// A fast serializer for nlohmann::json values: the same bytes as
//   value.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace)
// (what every API answer and report used), at a fraction of the cost.
//
// Why: callgrind (bench/http/profile.sh) put nlohmann's serializer at over half of the
// instructions of POST /v1/fit and a third of GET /v1/markets: it decodes every string byte
// through a UTF-8 state machine and writes the output one character at a time. Here strings are
// copied in runs between the bytes that need escaping, after one validation pass; numbers use
// nlohmann's own formatting (so doubles print exactly as before: grisu2, "1.0", "1e-05", NaN and
// infinities as null); a string that is not valid UTF-8 is handed to nlohmann itself so that its
// replacement characters come out exactly as before. json_writer_test.cc compares both byte for
// byte over random documents.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace gpuhub {

// A member name written in the source (w.Key("monthly_usd")), looked at when the program is
// compiled: one that needs no escaping and is short (every name this project writes) costs no
// scan at run time. Others are written through the general path, escaped as always.
class JsonKey {
 public:
  static constexpr std::size_t kMaxPlainBytes = 64;
  template <std::size_t N>
  consteval JsonKey(const char (&name)[N])  // NOLINT: implicit, from literals only
      : text_(name, N - 1), plain_(IsPlain(text_)) {}
  constexpr std::string_view text() const { return text_; }
  constexpr bool plain() const { return plain_; }

 private:
  static consteval bool IsPlain(std::string_view s) {
    if (s.size() > kMaxPlainBytes) return false;
    for (char c : s) {
      auto b = static_cast<unsigned char>(c);
      if (b < 0x20 || b >= 0x80 || c == '"' || c == '\\') return false;
    }
    return true;
  }
  std::string_view text_;
  bool plain_;
};

// indent < 0: compact ({"a":1,"b":[1,2]}); indent >= 0: one member per line, `indent` spaces per
// level ("key": value).
std::string DumpJson(const nlohmann::ordered_json& value, int indent = -1);
std::string DumpJson(const nlohmann::json& value, int indent = -1);

// Appends to `out` instead.
void AppendJson(std::string& out, const nlohmann::ordered_json& value, int indent = -1);
void AppendJson(std::string& out, const nlohmann::json& value, int indent = -1);

// Writes JSON straight into a string, for hot answers whose nlohmann tree costs more to build
// than the answer costs to send (GET /v1/markets, a book, trades: callgrind put building the tree
// at ~200k instructions of GET /v1/markets' ~450k; POST /v1/fit's report ~240k of ~570k). The
// bytes are those DumpJson(tree, indent) writes for the same values in the same order: compact
// with indent < 0, one member per line with indent >= 0 (empty containers stay "{}" and "[]").
// Commas, newlines and indentation are placed by the writer; the caller keeps the structure
// balanced (every Begin has its End, every Key its value).
class JsonWriter {
 public:
  explicit JsonWriter(std::string& out, int indent = -1) : out_(out), indent_(indent) {}
  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  // The next value is this member's. A literal name (JsonKey) is checked at compile time; any
  // other text is checked and escaped here.
  JsonWriter& Key(JsonKey key);
  template <typename Text>
    requires(!std::is_array_v<Text> && std::is_convertible_v<const Text&, std::string_view>)
  JsonWriter& Key(const Text& key) {
    return AnyKey(key);
  }
  JsonWriter& String(std::string_view value);
  JsonWriter& Int(std::int64_t value);
  JsonWriter& Uint(std::uint64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  // A value that is a tree already (written at this writer's indent and depth).
  JsonWriter& Value(const nlohmann::ordered_json& value);

  int indent() const { return indent_; }
  // Containers open now (0 at the top level; the members of an object opened there are at 1).
  int depth() const { return static_cast<int>(empty_.size()); }
  // Members written before and kept as text: one or more members ("key": value, separated as this
  // writer separates them) that MembersText rendered at this writer's indent and depth, appended
  // as they are, with the separator before them that the next member gets here. Text rendered
  // for another indent or depth would come out misindented: the caller keys it by both.
  JsonWriter& RawMembers(std::string_view text);
  // The members `write` writes into an object at `depth` (>= 1), as text for RawMembers at that
  // indent and depth: for answers that repeat parts that do not change between requests (the
  // fit report's catalog figures of each card and count), written once instead of every time.
  static std::string MembersText(int indent, int depth,
                                 const std::function<void(JsonWriter&)>& write);

 private:
  // A comma before every element or member but the first of its container (and, indented, the
  // line break and indentation before each).
  void Separate();
  JsonWriter& Open(char bracket);
  JsonWriter& AnyKey(std::string_view key);
  JsonWriter& PlainKey(std::string_view key, std::size_t spaces);
  JsonWriter& Close(char bracket);
  std::string& out_;
  int indent_;
  std::vector<char> empty_;  // per open container: 1 while nothing is written in it yet
  bool after_key_ = false;
};

}  // namespace gpuhub
