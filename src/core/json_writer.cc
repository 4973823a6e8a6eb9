#include "core/json_writer.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>

namespace gpuhub {
namespace {

// Whether `s` is well-formed UTF-8 (Unicode 3.9 table D3-7: no overlong forms, no surrogates,
// nothing above U+10FFFF), the sequences nlohmann's decoder accepts.
bool ValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  auto cont = [](unsigned char c) { return c >= 0x80 && c <= 0xbf; };
  while (p < end) {
    unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    std::size_t left = static_cast<std::size_t>(end - p);
    if (c >= 0xc2 && c <= 0xdf) {
      if (left < 2 || !cont(p[1])) return false;
      p += 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      if (left < 3 || !cont(p[2])) return false;
      unsigned char lo = c == 0xe0 ? 0xa0 : 0x80;
      unsigned char hi = c == 0xed ? 0x9f : 0xbf;
      if (p[1] < lo || p[1] > hi) return false;
      p += 3;
    } else if (c >= 0xf0 && c <= 0xf4) {
      if (left < 4 || !cont(p[2]) || !cont(p[3])) return false;
      unsigned char lo = c == 0xf0 ? 0x90 : 0x80;
      unsigned char hi = c == 0xf4 ? 0x8f : 0xbf;
      if (p[1] < lo || p[1] > hi) return false;
      p += 4;
    } else {
      return false;
    }
  }
  return true;
}

// The escape of byte `c` in a JSON string, or nullptr when it is written as is. nlohmann writes
// the short escapes where JSON has them and \u00XX (lower-case hex) for the other control bytes;
// DEL and everything above are written as they are (ensure_ascii=false).
struct EscapeTable {
  std::array<std::array<char, 7>, 32> control{};  // "\u00XX" or a short escape, NUL-terminated
  EscapeTable() {
    static constexpr char kHex[] = "0123456789abcdef";
    for (int c = 0; c < 32; ++c) {
      auto& e = control[static_cast<std::size_t>(c)];
      switch (c) {
        case '\b':
          e = {'\\', 'b'};
          break;
        case '\t':
          e = {'\\', 't'};
          break;
        case '\n':
          e = {'\\', 'n'};
          break;
        case '\f':
          e = {'\\', 'f'};
          break;
        case '\r':
          e = {'\\', 'r'};
          break;
        default:
          e = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
      }
    }
  }
};
const EscapeTable& Escapes() {
  static const EscapeTable table;
  return table;
}

// Per byte: 0 copied as is, 1 escaped, 2 not ASCII (the string needs a UTF-8 check).
struct ByteClasses {
  std::array<unsigned char, 256> of{};
  ByteClasses() {
    for (int c = 0; c < 256; ++c)
      of[static_cast<std::size_t>(c)] = c < 0x20 ? 1 : c >= 0x80 ? 2 : 0;
    of['"'] = 1;
    of['\\'] = 1;
  }
};
const ByteClasses& Classes() {
  static const ByteClasses classes;
  return classes;
}

void AppendString(std::string& out, std::string_view s) {
  const auto& of = Classes().of;
  const auto* bytes = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t n = s.size();
  // Most strings need nothing: one pass to find the first byte that does.
  std::size_t i = 0;
  while (i < n && of[bytes[i]] == 0) ++i;
  out += '"';
  out.append(s.data(), i);
  if (i == n) {
    out += '"';
    return;
  }
  std::size_t mark = out.size() - i - 1;  // where this string starts in `out`
  const EscapeTable& table = Escapes();
  bool checked = false;
  std::size_t run = i;  // start of the bytes not yet copied
  for (; i < n; ++i) {
    unsigned char kind = of[bytes[i]];
    if (kind == 0) continue;
    if (kind == 2) {
      if (!checked && !ValidUtf8(s.substr(i))) {
        // nlohmann's replacement of invalid sequences (U+FFFD), exactly as before.
        out.resize(mark);
        out += nlohmann::json(std::string(s))
                   .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        return;
      }
      checked = true;
      continue;
    }
    out.append(s.data() + run, i - run);
    run = i + 1;
    unsigned char c = bytes[i];
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      out += table.control[c].data();
    }
  }
  out.append(s.data() + run, n - run);
  out += '"';
}

template <typename Int>
void AppendInteger(std::string& out, Int v) {
  char buffer[24];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v);
  (void)ec;
  out.append(buffer, end);
}

void AppendDouble(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  std::array<char, 64> buffer;
  char* end = nlohmann::detail::to_chars(buffer.data(), buffer.data() + buffer.size(), v);
  out.append(buffer.data(), end);
}

void Indent(std::string& out, int spaces) { out.append(static_cast<std::size_t>(spaces), ' '); }

template <typename Json>
void Append(std::string& out, const Json& v, int indent, int level) {
  using nlohmann::detail::value_t;
  switch (v.type()) {
    case value_t::null:
      out += "null";
      return;
    case value_t::boolean:
      out += v.template get<bool>() ? "true" : "false";
      return;
    case value_t::number_integer:
      AppendInteger(out, v.template get<std::int64_t>());
      return;
    case value_t::number_unsigned:
      AppendInteger(out, v.template get<std::uint64_t>());
      return;
    case value_t::number_float:
      AppendDouble(out, v.template get<double>());
      return;
    case value_t::string:
      AppendString(out, v.template get_ref<const typename Json::string_t&>());
      return;
    case value_t::object: {
      const auto& object = v.template get_ref<const typename Json::object_t&>();
      if (object.empty()) {
        out += "{}";
        return;
      }
      out += indent >= 0 ? "{\n" : "{";
      bool first = true;
      for (const auto& [key, member] : object) {
        if (!first) out += indent >= 0 ? ",\n" : ",";
        first = false;
        if (indent >= 0) Indent(out, indent * (level + 1));
        AppendString(out, key);
        out += indent >= 0 ? ": " : ":";
        Append(out, member, indent, level + 1);
      }
      if (indent >= 0) {
        out += '\n';
        Indent(out, indent * level);
      }
      out += '}';
      return;
    }
    case value_t::array: {
      const auto& array = v.template get_ref<const typename Json::array_t&>();
      if (array.empty()) {
        out += "[]";
        return;
      }
      out += indent >= 0 ? "[\n" : "[";
      bool first = true;
      for (const auto& element : array) {
        if (!first) out += indent >= 0 ? ",\n" : ",";
        first = false;
        if (indent >= 0) Indent(out, indent * (level + 1));
        Append(out, element, indent, level + 1);
      }
      if (indent >= 0) {
        out += '\n';
        Indent(out, indent * level);
      }
      out += ']';
      return;
    }
    case value_t::binary:
    case value_t::discarded:
    default:
      // Never built by this project; nlohmann knows how it prints them.
      out += v.dump(indent, ' ', false, Json::error_handler_t::replace);
      return;
  }
}

}  // namespace

void AppendJson(std::string& out, const nlohmann::ordered_json& value, int indent) {
  Append(out, value, indent, 0);
}
void AppendJson(std::string& out, const nlohmann::json& value, int indent) {
  Append(out, value, indent, 0);
}

std::string DumpJson(const nlohmann::ordered_json& value, int indent) {
  std::string out;
  out.reserve(1024);
  Append(out, value, indent, 0);
  return out;
}
std::string DumpJson(const nlohmann::json& value, int indent) {
  std::string out;
  out.reserve(1024);
  Append(out, value, indent, 0);
  return out;
}

// ",\n" and enough indentation for the depths real answers have, appended in one piece (one
// append per member instead of three was ~10% of the fit report's instructions).
constexpr std::size_t kBreakSpaces = 64;
// One space more than the longest break: PlainKey copies 2 + kBreakSpaces bytes from either
// the comma or the line break.
constexpr std::array<char, 2 + kBreakSpaces + 1> kBreak = [] {
  std::array<char, 2 + kBreakSpaces + 1> line{};
  line[0] = ',';
  line[1] = '\n';
  for (std::size_t i = 2; i < line.size(); ++i) line[i] = ' ';
  return line;
}();

void JsonWriter::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (empty_.empty()) return;
  bool first = empty_.back() != 0;
  empty_.back() = 0;
  if (indent_ < 0) {
    if (!first) out_ += ',';
    return;
  }
  std::size_t spaces = static_cast<std::size_t>(indent_) * empty_.size();
  std::size_t skip = first ? 1 : 0;  // the first member has no comma before it
  if (spaces <= kBreakSpaces) {
    out_.append(kBreak.data() + skip, 2 - skip + spaces);
  } else {
    out_.append(kBreak.data() + skip, 2 - skip);
    Indent(out_, static_cast<int>(spaces));
  }
}

JsonWriter& JsonWriter::Open(char bracket) {
  Separate();
  out_ += bracket;
  empty_.push_back(1);
  return *this;
}
JsonWriter& JsonWriter::Close(char bracket) {
  // Indented, a container with members closes on its own line; an empty one stays "{}" / "[]".
  if (indent_ >= 0 && !empty_.back()) {
    out_ += '\n';
    Indent(out_, indent_ * static_cast<int>(empty_.size() - 1));
  }
  out_ += bracket;
  empty_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::BeginObject() { return Open('{'); }
JsonWriter& JsonWriter::EndObject() { return Close('}'); }
JsonWriter& JsonWriter::BeginArray() { return Open('['); }
JsonWriter& JsonWriter::EndArray() { return Close(']'); }
JsonWriter& JsonWriter::AnyKey(std::string_view key) {
  // Keys are short texts that need no escaping: the separator, the quoted key and the colon
  // are put together here and appended once (four appends per member were a third of the fit
  // report's cost, callgrind).
  constexpr std::size_t kMaxFastKey = JsonKey::kMaxPlainBytes;
  std::size_t spaces = indent_ >= 0 ? static_cast<std::size_t>(indent_) * empty_.size() : 0;
  const auto& of = Classes().of;
  bool fast = !after_key_ && !empty_.empty() && key.size() <= kMaxFastKey && spaces <= kBreakSpaces;
  for (std::size_t i = 0; fast && i < key.size(); ++i) {
    fast = of[static_cast<unsigned char>(key[i])] == 0;
  }
  if (!fast) {
    Separate();
    AppendString(out_, key);
    out_ += indent_ >= 0 ? ": " : ":";
    after_key_ = true;
    return *this;
  }
  return PlainKey(key, spaces);
}

JsonWriter& JsonWriter::Key(JsonKey key) {
  // The name was checked when the program was compiled: no scan here (the scan and the table it
  // reads were about a third of each member's cost, callgrind).
  std::size_t spaces = indent_ >= 0 ? static_cast<std::size_t>(indent_) * empty_.size() : 0;
  if (!key.plain() || after_key_ || empty_.empty() || spaces > kBreakSpaces) {
    return AnyKey(key.text());
  }
  return PlainKey(key.text(), spaces);
}

JsonWriter& JsonWriter::PlainKey(std::string_view key, std::size_t spaces) {
  // ",\n" + indentation, the quoted key and the colon in one piece: the line break and the
  // indentation copied from kBreak in one fixed-size move, then cut to length.
  char line[2 + kBreakSpaces + 1 + JsonKey::kMaxPlainBytes + 3];
  std::size_t skip = empty_.back() != 0 ? 1 : 0;  // no comma before the first member
  empty_.back() = 0;
  std::size_t n;
  if (indent_ >= 0) {
    std::memcpy(line, kBreak.data() + skip, 2 + kBreakSpaces);
    n = 2 - skip + spaces;
  } else {
    line[0] = ',';
    n = 1 - skip;
  }
  line[n++] = '"';
  std::memcpy(line + n, key.data(), key.size());
  n += key.size();
  line[n++] = '"';
  line[n++] = ':';
  if (indent_ >= 0) line[n++] = ' ';
  out_.append(line, n);
  after_key_ = true;
  return *this;
}
JsonWriter& JsonWriter::String(std::string_view value) {
  Separate();
  AppendString(out_, value);
  return *this;
}
JsonWriter& JsonWriter::Int(std::int64_t value) {
  Separate();
  AppendInteger(out_, value);
  return *this;
}
JsonWriter& JsonWriter::Uint(std::uint64_t value) {
  Separate();
  AppendInteger(out_, value);
  return *this;
}
JsonWriter& JsonWriter::Double(double value) {
  Separate();
  AppendDouble(out_, value);
  return *this;
}
JsonWriter& JsonWriter::Bool(bool value) {
  Separate();
  out_ += value ? "true" : "false";
  return *this;
}
JsonWriter& JsonWriter::Null() {
  Separate();
  out_ += "null";
  return *this;
}
JsonWriter& JsonWriter::Value(const nlohmann::ordered_json& value) {
  Separate();
  Append(out_, value, indent_, static_cast<int>(empty_.size()));
  return *this;
}
JsonWriter& JsonWriter::RawMembers(std::string_view text) {
  Separate();
  out_.append(text);
  return *this;
}
std::string JsonWriter::MembersText(int indent, int depth,
                                    const std::function<void(JsonWriter&)>& write) {
  std::string out;
  JsonWriter w(out, indent);
  // Open `depth` containers (the text before the members is dropped), then write the members as
  // the first of their object: what comes before the first one is the separator RawMembers
  // writes itself ("\n" and the indentation; nothing when compact).
  for (int i = 0; i < depth; ++i) w.Open('{');
  std::size_t start = out.size();
  write(w);
  if (indent >= 0 && out.size() > start) start += 1 + static_cast<std::size_t>(indent) * depth;
  return out.substr(start);
}

}  // namespace gpuhub
