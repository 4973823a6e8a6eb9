// ServerFixture (tests/server/server_fixture.h: a real `gpuhub serve` with an administrator) plus
// what the storage suites (API, crash) share: storage hosts in DFW-1 and IAD-1, fleet nodes,
// rentals, volumes and the storage checks. Parameterized by the backend ("sqlite" or
// "postgresql"; the latter skips without GPUHUB_TEST_PG_URL).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "server_fixture.h"

namespace gpuhub::testing {

inline constexpr long long kDaySeconds = 24 * 3600;

class StorageFixture : public ServerFixture {
 protected:
  // Three storage hosts of `tb` TB in each of the regions.
  void StorageHosts(long long tb = 100) {
    for (const char* region : {"DFW-1", "IAD-1"}) {
      for (int i = 0; i < 3; ++i) {
        auto r = client_->Call("POST", "/v1/admin/storage-hosts",
                               {{"region", region}, {"capacity_tb", tb}}, admin_);
        ASSERT_EQ(r.status, 201) << r.body;
      }
    }
  }
  json Node(const std::string& gpu, const std::string& region) {
    auto r = client_->Call("POST", "/v1/admin/nodes", {{"gpu", gpu}, {"region", region}}, admin_);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json();
  }
  std::string Usd(const std::string& token) {
    auto r = client_->Call("GET", "/v1/wallets", nullptr, token);
    return r.Json()["wallets"][0]["available"];
  }
  // Orders a rental (201 expected) and returns its id.
  long long Rent(const std::string& token, const std::string& gpu, const std::string& region,
                 const std::string& term = "month", long long extra_nvme_tb = 0) {
    json body = {{"gpu", gpu}, {"count", 1}, {"term", term}, {"region", region}};
    if (extra_nvme_tb > 0) body["extra_nvme_tb"] = extra_nvme_tb;
    auto r = client_->Call("POST", "/v1/rentals", body, token);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("id", 0LL);
  }
  json Volume(const std::string& token, const std::string& region, long long tb) {
    auto r = client_->Call("POST", "/v1/volumes", {{"region", region}, {"size_tb", tb}}, token);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json();
  }
  json Get(const std::string& path, const std::string& token) {
    auto r = client_->Call("GET", path, nullptr, token);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    return r.Json();
  }
  // A 4xx whose error names `field`.
  void ExpectRefused(const HttpResponse& r, int status, const std::string& field) {
    EXPECT_EQ(r.status, status) << r.body;
    json j = r.Json();
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    if (field.empty()) return;
    ASSERT_TRUE(j["error"].contains("field")) << r.body;
    EXPECT_EQ(j["error"]["field"], field) << r.body;
  }
  // GET /v1/admin/storage says the invariants and settlement hold.
  void ExpectConsistent() {
    json s = Get("/v1/admin/storage", admin_);
    EXPECT_EQ(s["invariants"], "ok") << s.dump();
    EXPECT_EQ(s["settlement"], "ok") << s.dump();
    json r = Get("/v1/admin/rentals", admin_);
    EXPECT_EQ(r["invariants"], "ok") << r.dump();
    EXPECT_EQ(r["settlement"], "ok") << r.dump();
  }
};

}  // namespace gpuhub::testing
