// docs/openapi.json (as compiled into the binary, GET /v1/openapi.json) against the router
// `gpuhub serve` builds (RegisterApiRoutes): every route is described and every described
// operation is a route, with the same path and query parameters, and the API-key scopes it
// documents are api_key_scopes.h's. Each failure names the method and path, so a route added
// without its description (or a description left behind) says exactly what to write.
// The document's syntax and the response bodies are checked by tests/e2e/openapi.test.mjs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/clock.h"
#include "engine/api_keys.h"
#include "engine/engine.h"
#include "engine/engine_test_fixture.h"
#include "engine/metrics.h"
#include "http/api.h"
#include "http/api_key_scopes.h"
#include "http/config.h"
#include "http/router.h"

namespace gpuhub::http {
namespace {

using nlohmann::json;

// Routes the document deliberately leaves out, each with why. None today: the agents' routes and
// the payment webhook are endpoints like any other and are described.
struct Excluded {
  const char* method;
  const char* path;
  const char* why;
};
const std::vector<Excluded> kUndocumented = {};

bool IsExcluded(const std::string& method, const std::string& path) {
  for (const auto& e : kUndocumented) {
    if (method == e.method && path == e.path) return true;
  }
  return false;
}

constexpr const char* kMethods[] = {"get", "put", "post", "delete", "patch", "head", "options"};

std::string Upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The router of `gpuhub serve`, built on a throwaway database (the engine is never started:
// registering routes only captures references).
class OpenApiRoutesTest : public ::testing::Test {
 protected:
  OpenApiRoutesTest()
      : engine_(engine::OpenMigrated(engine::FreshSqliteUrl("gpuhub_openapi_test", "api.db")),
                clock_, metrics_),
        api_(engine_, metrics_, config_) {
    RegisterApiRoutes(router_, api_, std::string(GPUHUB_SOURCE_DIR) + "/data");
    doc_ = json::parse(OpenApiDocument());
  }

  // "METHOD /path" -> the router's query parameters.
  std::map<std::string, std::vector<std::string>> RouterRoutes() const {
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& r : router_.Routes()) out[r.method + " " + r.pattern] = r.query_params;
    return out;
  }

  // A parameter object with its $ref ("#/components/parameters/X") resolved.
  json Resolve(const json& p) const {
    if (!p.contains("$ref")) return p;
    std::string ref = p["$ref"];
    const std::string prefix = "#/components/parameters/";
    EXPECT_TRUE(ref.starts_with(prefix)) << ref;
    return doc_["components"]["parameters"].at(ref.substr(prefix.size()));
  }

  // The operation's parameters in `where` (path-level ones included).
  std::set<std::string> Params(const json& path_item, const json& op, const std::string& where) {
    std::set<std::string> out;
    for (const json* list : {&path_item, &op}) {
      if (!list->contains("parameters")) continue;
      for (const auto& p : (*list)["parameters"]) {
        json resolved = Resolve(p);
        if (resolved["in"] == where) out.insert(resolved["name"].get<std::string>());
      }
    }
    return out;
  }

  ManualClock clock_{1'000'000};
  engine::MetricsRegistry metrics_;
  ServiceConfig config_;
  engine::Engine engine_;
  ApiContext api_;
  Router router_;
  json doc_;
};

TEST_F(OpenApiRoutesTest, TheDocumentIsOpenApi31) {
  EXPECT_EQ(doc_.value("openapi", ""), "3.1.0");
  ASSERT_TRUE(doc_.contains("paths"));
  EXPECT_GT(router_.Routes().size(), 100u);  // the real router, not an empty one
}

TEST_F(OpenApiRoutesTest, EveryRouteIsDescribedAndEveryDescriptionIsARoute) {
  auto routes = RouterRoutes();
  std::set<std::string> documented;
  for (const auto& [path, item] : doc_["paths"].items()) {
    for (const char* m : kMethods) {
      if (item.contains(m)) documented.insert(Upper(m) + " " + path);
    }
  }
  std::string missing, extra;
  for (const auto& [route, query] : routes) {
    auto space = route.find(' ');
    if (IsExcluded(route.substr(0, space), route.substr(space + 1))) continue;
    if (!documented.contains(route)) missing += "\n  " + route;
  }
  for (const auto& op : documented) {
    if (!routes.contains(op)) extra += "\n  " + op;
  }
  EXPECT_TRUE(missing.empty()) << "routes of the router that docs/openapi.json does not describe "
                                  "(add them under \"paths\"):"
                               << missing;
  EXPECT_TRUE(extra.empty()) << "operations in docs/openapi.json that the router does not have "
                                "(remove them, or fix the method or path):"
                             << extra;
}

TEST_F(OpenApiRoutesTest, PathAndQueryParametersAreTheRoutesOwn) {
  auto routes = RouterRoutes();
  for (const auto& [path, item] : doc_["paths"].items()) {
    std::set<std::string> in_path;
    for (std::size_t at = path.find('{'); at != std::string::npos; at = path.find('{', at + 1)) {
      in_path.insert(path.substr(at + 1, path.find('}', at) - at - 1));
    }
    for (const char* m : kMethods) {
      if (!item.contains(m)) continue;
      std::string route = Upper(m) + " " + path;
      auto it = routes.find(route);
      if (it == routes.end()) continue;  // reported by the test above
      const json& op = item[m];
      std::set<std::string> query(it->second.begin(), it->second.end());
      EXPECT_EQ(Params(item, op, "query"), query)
          << route << ": the documented query parameters differ from those the route reads";
      EXPECT_EQ(Params(item, op, "path"), in_path)
          << route << ": every {name} of the path needs its path parameter, and only those";
    }
  }
}

// What a key needs, as the document says it: security alternatives naming "apiKey" carry the
// scopes; an operation with credentials but no "apiKey" alternative is closed to keys.
TEST_F(OpenApiRoutesTest, ApiKeyScopesAreThoseTheServerChecks) {
  for (const auto& [path, item] : doc_["paths"].items()) {
    for (const char* m : kMethods) {
      if (!item.contains(m)) continue;
      const json& op = item[m];
      std::string route = Upper(m) + " " + path;
      const json& security = op.contains("security") ? op["security"] : doc_["security"];
      bool credentials = false;
      std::optional<std::vector<std::string>> key_scopes;
      for (const auto& alternative : security) {
        for (const auto& [scheme, scopes] : alternative.items()) {
          if (scheme == "apiKey") key_scopes = scopes.get<std::vector<std::string>>();
          if (scheme == "session" || scheme == "sessionCookie") credentials = true;
        }
      }
      ApiKeyAccess access = ApiKeyAccessFor(Upper(m), path);
      if (key_scopes) {
        EXPECT_FALSE(access.session_only) << route << " documents API-key scopes, but the "
                                          << "server refuses keys there: " << access.why;
        auto want = engine::ApiScopeNames(access.scopes);
        std::sort(want.begin(), want.end());
        std::sort(key_scopes->begin(), key_scopes->end());
        EXPECT_EQ(*key_scopes, want) << route << ": the apiKey scopes differ from "
                                     << "api_key_scopes.cc's";
      } else if (credentials) {
        EXPECT_TRUE(access.session_only)
            << route << " is documented as closed to API keys, but a key with "
            << ::testing::PrintToString(engine::ApiScopeNames(access.scopes))
            << " may call it: add {\"apiKey\": [...]} to its security";
      }
    }
  }
}

// Every operation answers errors in the one shape, and says so.
TEST_F(OpenApiRoutesTest, EveryOperationDescribesItsErrors) {
  for (const auto& [path, item] : doc_["paths"].items()) {
    for (const char* m : kMethods) {
      if (!item.contains(m)) continue;
      const json& op = item[m];
      std::string route = Upper(m) + " " + path;
      ASSERT_TRUE(op.contains("responses")) << route;
      EXPECT_TRUE(op.contains("operationId")) << route << " has no operationId";
      bool error = false;
      for (const auto& [status, response] : op["responses"].items()) {
        if (status == "default" || status.starts_with("4") || status.starts_with("5")) error = true;
      }
      EXPECT_TRUE(error) << route << " describes no error response";
    }
  }
}

}  // namespace
}  // namespace gpuhub::http
