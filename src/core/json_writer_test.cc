#include "core/json_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

namespace gpuhub {
namespace {

using OrderedJson = nlohmann::ordered_json;

std::string Nlohmann(const OrderedJson& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

TEST(JsonWriterTest, KnownDocumentsCompactAndIndented) {
  OrderedJson j = {{"b", 1},   {"a", -2.5},    {"list", {1, 2.0, "x", nullptr, true}},
                   {"o", {}},  {"e", OrderedJson::array()},
                   {"s", "quote\" back\\ nl\n tab\t ctl\x01 del\x7f é €"}};
  EXPECT_EQ(DumpJson(j),
            "{\"b\":1,\"a\":-2.5,\"list\":[1,2.0,\"x\",null,true],\"o\":null,\"e\":[],"
            "\"s\":\"quote\\\" back\\\\ nl\\n tab\\t ctl\\u0001 del\x7f é €\"}");
  EXPECT_EQ(DumpJson(OrderedJson{{"a", {1, 2}}, {"b", OrderedJson::object()}}, 2),
            "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {}\n}");
  EXPECT_EQ(DumpJson(OrderedJson(1e-5)), "1e-05");
  EXPECT_EQ(DumpJson(OrderedJson(1e21)), "1e+21");
  EXPECT_EQ(DumpJson(OrderedJson(std::nan(""))), "null");
  EXPECT_EQ(DumpJson(OrderedJson(-std::numeric_limits<double>::infinity())), "null");
  EXPECT_EQ(DumpJson(OrderedJson(std::numeric_limits<std::int64_t>::min())),
            "-9223372036854775808");
  EXPECT_EQ(DumpJson(OrderedJson(std::numeric_limits<std::uint64_t>::max())),
            "18446744073709551615");
  // Invalid UTF-8 (a lone continuation byte, an overlong '/', a surrogate, a cut sequence) is
  // replaced with U+FFFD exactly as nlohmann does it.
  for (const char* bad : {"a\x80z", "\xc0\xaf", "\xed\xa0\x80", "ok\xe2\x82"}) {
    OrderedJson s = std::string(bad);
    EXPECT_EQ(DumpJson(s), Nlohmann(s, -1)) << bad;
    EXPECT_NE(DumpJson(s).find("\xef\xbf\xbd"), std::string::npos) << bad;
  }
}

// Random documents: strings of any bytes (valid and invalid UTF-8, every control byte), doubles
// of every magnitude (random bit patterns: subnormals, NaN, infinities, integral values), integers
// at their limits, nesting with empty containers. Byte-for-byte what nlohmann writes, for the
// compact form and three indents, in both object flavours.
class RandomJson {
 public:
  explicit RandomJson(std::uint64_t seed) : rng_(seed) {}

  OrderedJson Value(int depth) {
    int kind = Pick(depth > 4 ? 6 : 8);
    switch (kind) {
      case 0: return nullptr;
      case 1: return Pick(2) == 1;
      case 2: return static_cast<std::int64_t>(rng_());
      case 3: return static_cast<std::uint64_t>(rng_());
      case 4: return Double();
      case 5: return String();
      case 6: {
        OrderedJson a = OrderedJson::array();
        for (int n = Pick(5); n > 0; --n) a.push_back(Value(depth + 1));
        return a;
      }
      default: {
        OrderedJson o = OrderedJson::object();
        for (int n = Pick(5); n > 0; --n) o[String()] = Value(depth + 1);
        return o;
      }
    }
  }

 private:
  int Pick(int n) { return static_cast<int>(rng_() % static_cast<std::uint64_t>(n)); }
  double Double() {
    switch (Pick(4)) {
      case 0: {
        std::uint64_t bits = rng_();
        double d;
        std::memcpy(&d, &bits, sizeof d);
        return d;
      }
      case 1: return static_cast<double>(static_cast<std::int32_t>(rng_()));
      case 2: return static_cast<double>(rng_() % 1000000) / 1000.0;
      default: return std::ldexp(static_cast<double>(rng_() % 1000), Pick(200) - 100);
    }
  }
  std::string String() {
    static const char* kPieces[] = {"a", "Z", " ", "\"", "\\", "\n", "\x01", "\x1f", "\x7f",
                                    "é", "€", "😀", "\x80", "\xc3", "\xe2\x82", "\xf0\x9f\x98",
                                    "\xed\xa0\x80", "\xf4\x90\x80\x80", "/", "\t"};
    std::string s;
    for (int n = Pick(8); n > 0; --n) s += kPieces[Pick(sizeof kPieces / sizeof *kPieces)];
    return s;
  }
  std::mt19937_64 rng_;
};

TEST(JsonWriterTest, RandomDocumentsMatchNlohmannByteForByte) {
  RandomJson random(20261201);
  for (int i = 0; i < 3000; ++i) {
    OrderedJson doc = random.Value(0);
    nlohmann::json sorted = doc;  // the std::map flavour too
    for (int indent : {-1, 0, 2, 4}) {
      ASSERT_EQ(DumpJson(doc, indent), Nlohmann(doc, indent)) << "document " << i;
      ASSERT_EQ(DumpJson(sorted, indent),
                sorted.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace))
          << "document " << i;
    }
  }
}

// The streaming writer writes what DumpJson writes for the tree of the same values.
TEST(JsonWriterTest, StreamingWriterMatchesTheTree) {
  OrderedJson tree = {{"markets",
                       {{{"gpu", "H100 \"SXM\""}, {"ask", nullptr}, {"n", -3}, {"ok", true},
                         {"x", 0.1}, {"last", {{"id", 7}}}, {"empty", OrderedJson::array()}},
                        {{"gpu", "é"}, {"ask", "2.500000"}, {"n", 0}, {"ok", false},
                         {"x", 1e300}, {"last", nullptr}, {"empty", OrderedJson::object()}}}},
                      {"as_of", "2026-12-01T00:00:00Z"}};
  std::string out;
  JsonWriter w(out);
  w.BeginObject().Key("markets").BeginArray();
  w.BeginObject().Key("gpu").String("H100 \"SXM\"").Key("ask").Null().Key("n").Int(-3);
  w.Key("ok").Bool(true).Key("x").Double(0.1).Key("last").Value(OrderedJson{{"id", 7}});
  w.Key("empty").BeginArray().EndArray().EndObject();
  w.BeginObject().Key("gpu").String("é").Key("ask").String("2.500000").Key("n").Int(0);
  w.Key("ok").Bool(false).Key("x").Double(1e300).Key("last").Null();
  w.Key("empty").BeginObject().EndObject().EndObject();
  w.EndArray().Key("as_of").String("2026-12-01T00:00:00Z").EndObject();
  EXPECT_EQ(out, DumpJson(tree));
}

// Writes `v` through the writer's calls (every `every`-th container as a whole tree through
// Value, so that a tree inside a streamed container is indented at its depth too).
void Replay(JsonWriter& w, const OrderedJson& v, int& count, int every) {
  if ((v.is_object() || v.is_array()) && ++count % every == 0) {
    w.Value(v);
    return;
  }
  switch (v.type()) {
    case OrderedJson::value_t::null:
      w.Null();
      return;
    case OrderedJson::value_t::boolean:
      w.Bool(v.get<bool>());
      return;
    case OrderedJson::value_t::number_integer:
      w.Int(v.get<std::int64_t>());
      return;
    case OrderedJson::value_t::number_unsigned:
      w.Uint(v.get<std::uint64_t>());
      return;
    case OrderedJson::value_t::number_float:
      w.Double(v.get<double>());
      return;
    case OrderedJson::value_t::string:
      w.String(v.get_ref<const std::string&>());
      return;
    case OrderedJson::value_t::array:
      w.BeginArray();
      for (const auto& e : v) Replay(w, e, count, every);
      w.EndArray();
      return;
    case OrderedJson::value_t::object:
      w.BeginObject();
      for (const auto& [k, e] : v.items()) {
        w.Key(k);
        Replay(w, e, count, every);
      }
      w.EndObject();
      return;
    default:
      w.Value(v);
      return;
  }
}

// Indented or not, the streaming writer writes byte for byte what DumpJson writes for the tree
// (the fit report is written indented by 2 this way: report_json_test.cc checks its bytes).
TEST(JsonWriterTest, StreamingWriterMatchesTheTreeAtEveryIndent) {
  RandomJson random(20261202);
  for (int i = 0; i < 2000; ++i) {
    OrderedJson doc = random.Value(0);
    for (int indent : {-1, 0, 2, 4}) {
      for (int every : {1000000, 3}) {
        std::string out;
        JsonWriter w(out, indent);
        int count = 0;
        Replay(w, doc, count, every);
        ASSERT_EQ(out, DumpJson(doc, indent)) << "document " << i << " indent " << indent;
      }
    }
  }
  std::string out;
  JsonWriter w(out, 2);
  w.BeginObject().Key("a").BeginArray().Int(1).BeginObject().EndObject().EndArray();
  w.Key("b").BeginArray().EndArray().Key("c").Value(OrderedJson{{"d", {1}}}).EndObject();
  EXPECT_EQ(out,
            "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": [],\n  \"c\": {\n    \"d\": [\n"
            "      1\n    ]\n  }\n}");
  // A key too long for the writer's one-piece path, and keys that need escaping.
  for (int indent : {-1, 2}) {
    OrderedJson keys = {{std::string(100, 'k'), 1}, {"a\"b", 2}, {"tab\t", {{"\x01", 3}}}};
    std::string keys_out;
    JsonWriter keys_writer(keys_out, indent);
    int keys_count = 0;
    Replay(keys_writer, keys, keys_count, 1000000);
    EXPECT_EQ(keys_out, DumpJson(keys, indent));
  }
  // Deeper than the writer's ready-made indentation (64 spaces): 20 levels at 4.
  OrderedJson deep = {1, "x"};
  for (int i = 0; i < 20; ++i) deep = OrderedJson{{"k", deep}, {"n", i}};
  int count = 0;
  std::string deep_out;
  JsonWriter deep_writer(deep_out, 4);
  Replay(deep_writer, deep, count, 1000000);
  EXPECT_EQ(deep_out, DumpJson(deep, 4));
  EXPECT_NE(deep_out.find(std::string(84, ' ') + "1,"), std::string::npos);
}

// Members kept as text (MembersText) and written with RawMembers come out exactly as the same
// members written one by one: first in their object or after others, followed by more, at every
// indent and at depths 1 to 4, members that hold containers too.
TEST(JsonWriterTest, RawMembersMatchTheMembersWrittenOneByOne) {
  auto kept = [](JsonWriter& w) {
    w.Key("n").Double(1490.0).Key("list").BeginArray().String("a").String("b").EndArray();
    w.Key("o").BeginObject().Key("x").Int(-1).EndObject().Key("e").BeginArray().EndArray();
  };
  for (int indent : {-1, 0, 2, 4}) {
    for (int depth = 1; depth <= 4; ++depth) {
      for (bool first : {true, false}) {
        auto document = [&](bool raw) {
          std::string out;
          JsonWriter w(out, indent);
          w.BeginObject();
          for (int d = 1; d < depth; ++d) w.Key("level").BeginObject();
          EXPECT_EQ(w.depth(), depth);
          if (!first) w.Key("before").Bool(true);
          if (raw) {
            w.RawMembers(JsonWriter::MembersText(indent, depth, kept));
          } else {
            kept(w);
          }
          w.Key("after").Null();
          for (int d = 0; d < depth; ++d) w.EndObject();
          EXPECT_EQ(w.depth(), 0);
          return out;
        };
        std::string expected = document(false);
        EXPECT_EQ(document(true), expected) << "indent " << indent << " depth " << depth;
        EXPECT_TRUE(nlohmann::json::accept(expected)) << expected;
      }
    }
  }
  EXPECT_EQ(JsonWriter::MembersText(2, 2, [](JsonWriter& w) { w.Key("a").Int(1).Key("b").Int(2); }),
            "\"a\": 1,\n    \"b\": 2");
}

// Literal names are looked at when compiling: plain ones take the quick path, the others (quotes,
// control bytes, non-ASCII, over 64 bytes) are escaped like any text.
static_assert(JsonKey("monthly_usd").plain());
static_assert(JsonKey("").plain());
static_assert(!JsonKey("a\"b").plain());
static_assert(!JsonKey("tab\t").plain());
static_assert(!JsonKey("caf\xc3\xa9").plain());
static_assert(!JsonKey("kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk").plain());

TEST(JsonWriterTest, LiteralKeysMatchTheTree) {
  for (int indent : {-1, 0, 2, 4}) {
    std::string out;
    JsonWriter w(out, indent);
    w.BeginObject().Key("plain").Int(1).Key("a\"b").Int(2).Key("tab\t").BeginObject();
    w.Key("caf\xc3\xa9").Int(3).Key("").Int(4).EndObject();
    w.Key("kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk").Int(5);
    std::string runtime = "run\x01time";
    w.Key(runtime).Int(6).Key(std::string_view("view")).Int(7).EndObject();
    OrderedJson tree = {{"plain", 1},
                        {"a\"b", 2},
                        {"tab\t", {{"caf\xc3\xa9", 3}, {"", 4}}},
                        {std::string(65, 'k'), 5},
                        {"run\x01time", 6},
                        {"view", 7}};
    EXPECT_EQ(out, DumpJson(tree, indent)) << indent;
  }
}

TEST(JsonWriterTest, AppendJsonAppends) {
  std::string out = "x=";
  AppendJson(out, OrderedJson{{"k", "v"}});
  EXPECT_EQ(out, "x={\"k\":\"v\"}");
}

}  // namespace
}  // namespace gpuhub
