// Storage through HTTP: a real server with a manual clock on SQLite and PostgreSQL — a volume's
// whole life (first day paid, attached to two instances with the concurrent-writers warning,
// snapshot, restore, growth, restart), bad input (each a 4xx naming the field, and nothing changed),
// the unpaid path to the second (read-only, detached, deleted at its notified time; paying before
// restores), egress samples charged once even when resent, and extra NVMe at the order and on a
// running rental.
#include <gtest/gtest.h>

#include "storage_fixture.h"

namespace gpuhub::testing {
namespace {

using StorageApiTest = StorageFixture;

TEST_P(StorageApiTest, AVolumeIsCreatedAttachedSnapshottedRestoredAndGrown) {
  StorageHosts();
  Node("H100 SXM", "DFW-1");
  std::string alice = SignUpAndLogIn(*client_, "alice");
  Credit("alice", "5000");
  long long a = Rent(alice, "H100 SXM", "DFW-1");
  long long b = Rent(alice, "H100 SXM", "DFW-1");
  EXPECT_EQ(Usd(alice), "1620.000000");  // 5000 - 2 x 1690

  // 4 TB in DFW-1: three replicas on distinct hosts, day 1 paid: R(56/30) = 1.866667.
  auto created = client_->Call("POST", "/v1/volumes",
                               {{"region", "dfw-1"}, {"size_tb", 4}, {"name", "ckpt"}}, alice,
                               "create-ckpt");
  ASSERT_EQ(created.status, 201) << created.body;
  json v = created.Json();
  EXPECT_EQ(v["region"], "DFW-1");
  EXPECT_EQ(v["state"], "active");
  EXPECT_EQ(v["access"], "read_write");
  ASSERT_EQ(v["hosts"].size(), 3u);
  EXPECT_NE(v["hosts"][0]["id"], v["hosts"][1]["id"]);
  EXPECT_NE(v["hosts"][1]["id"], v["hosts"][2]["id"]);
  EXPECT_EQ(v["bill"]["days_paid"], 1);
  EXPECT_EQ(v["bill"]["price"]["per_month"], "56.000000");
  EXPECT_EQ(Usd(alice), "1618.133333");
  // The same Idempotency-Key replays: one volume, one charge.
  auto replay = client_->Call("POST", "/v1/volumes",
                              {{"size_tb", 4}, {"name", "ckpt"}, {"region", "dfw-1"}}, alice,
                              "create-ckpt");
  EXPECT_EQ(replay.status, 201);
  EXPECT_EQ(replay.Header("idempotent-replayed"), "true");
  EXPECT_EQ(Get("/v1/volumes", alice)["volumes"].size(), 1u);
  EXPECT_EQ(Usd(alice), "1618.133333");
  std::string id = std::to_string(v["id"].get<long long>());

  // Attached to both rentals: one shared filesystem, and the answer says so.
  auto first = client_->Call("POST", "/v1/volumes/" + id + "/attach", {{"rental_id", a}}, alice);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_TRUE(first.Json()["warning"].is_null());
  auto both = client_->Call("POST", "/v1/volumes/" + id + "/attach", {{"rental_id", b}}, alice);
  ASSERT_EQ(both.status, 200) << both.body;
  EXPECT_EQ(both.Json()["attachments"].size(), 2u);
  EXPECT_NE(both.Json()["warning"].get<std::string>().find("concurrent writers must coordinate"),
            std::string::npos);
  json rental = Get("/v1/rentals/" + std::to_string(a), alice);
  ASSERT_EQ(rental["storage"]["volumes"].size(), 1u);
  EXPECT_EQ(rental["storage"]["volumes"][0]["access"], "read_write");

  // A snapshot of it ($6 x 4 / 30 = 0.8 a day), restored as a new, larger volume.
  auto snap = client_->Call("POST", "/v1/snapshots", {{"volume_id", v["id"]}, {"name", "s1"}},
                            alice);
  ASSERT_EQ(snap.status, 201) << snap.body;
  EXPECT_EQ(snap.Json()["size_tb"], 4);
  EXPECT_EQ(snap.Json()["source"]["volume_id"], v["id"]);
  EXPECT_EQ(Usd(alice), "1617.333333");
  std::string sid = std::to_string(snap.Json()["id"].get<long long>());
  auto restored = client_->Call("POST", "/v1/snapshots/" + sid + "/restore", {{"size_tb", 5}},
                                alice);
  ASSERT_EQ(restored.status, 201) << restored.body;
  EXPECT_EQ(restored.Json()["restored_from"], snap.Json()["id"]);
  EXPECT_EQ(restored.Json()["size_tb"], 5);
  EXPECT_EQ(restored.Json()["region"], "DFW-1");
  EXPECT_EQ(Usd(alice), "1615.000000");  // - R(70/30) = 2.333333
  // A snapshot of the rental's local NVMe: 2 TB included with one H100.
  auto nvme = client_->Call("POST", "/v1/snapshots", {{"rental_id", a}}, alice);
  ASSERT_EQ(nvme.status, 201) << nvme.body;
  EXPECT_EQ(nvme.Json()["size_tb"], 2);
  EXPECT_EQ(nvme.Json()["source"]["kind"], "local_nvme");

  // Six hours into day 1 the volume grows to 7 TB: 3 TB x 14 x 18/720 = 1.05.
  Advance(6 * 3600);
  std::string before = Usd(alice);
  auto grown = client_->Call("POST", "/v1/volumes/" + id + "/resize", {{"size_tb", 7}}, alice);
  ASSERT_EQ(grown.status, 200) << grown.body;
  EXPECT_EQ(Micros(before) - Micros(Usd(alice)), 1'050'000);

  Restart();  // nothing of it is lost
  json detail = Get("/v1/volumes/" + id, alice);
  EXPECT_EQ(detail["size_tb"], 7);
  EXPECT_EQ(detail["attachments"].size(), 2u);
  ASSERT_EQ(detail["charges"].size(), 2u);
  EXPECT_EQ(detail["charges"][0]["kind"], "volume_growth");
  EXPECT_EQ(detail["charges"][1]["kind"], "volume_days");
  EXPECT_EQ(detail["history"][0]["event"], "created");
  // Day 2 at 7 TB: R(98 x 2/30) - R(98/30) = 6.533333 - 3.266667.
  before = Usd(alice);
  Advance(18 * 3600);
  json volumes = Get("/v1/volumes", alice);
  EXPECT_EQ(Get("/v1/volumes/" + id, alice)["bill"]["days_paid"], 2);
  // Releasing a rental detaches the volume there; it survives.
  auto released = client_->Call("POST", "/v1/rentals/" + std::to_string(a) + "/release",
                                {{"confirm", true}}, alice);
  ASSERT_EQ(released.status, 200) << released.body;
  detail = Get("/v1/volumes/" + id, alice);
  ASSERT_EQ(detail["attachments"].size(), 1u);
  EXPECT_EQ(detail["attachments"][0]["rental_id"], b);
  EXPECT_EQ(detail["state"], "active");
  // Detached from b, it can be deleted (the day paid is not refunded).
  ASSERT_EQ(client_->Call("DELETE", "/v1/volumes/" + id, nullptr, alice).status, 409);
  ASSERT_EQ(client_->Call("POST", "/v1/volumes/" + id + "/detach", {{"rental_id", b}}, alice)
                .status,
            200);
  std::string kept = Usd(alice);
  auto deleted = client_->Call("DELETE", "/v1/volumes/" + id, nullptr, alice);
  ASSERT_EQ(deleted.status, 200) << deleted.body;
  EXPECT_EQ(deleted.Json()["state"], "deleted");
  EXPECT_EQ(Usd(alice), kept);
  ExpectConsistent();
}

TEST_P(StorageApiTest, BadInputIsA4xxNamingTheFieldAndChangesNothing) {
  StorageHosts();
  Node("H100 SXM", "DFW-1");
  Node("H100 SXM", "IAD-1");
  std::string alice = SignUpAndLogIn(*client_, "alice");
  std::string bob = SignUpAndLogIn(*client_, "bob");
  Credit("alice", "5000");
  Credit("bob", "5000");
  long long dfw = Rent(alice, "H100 SXM", "DFW-1");
  long long iad = Rent(alice, "H100 SXM", "IAD-1");
  long long bobs = Rent(bob, "H100 SXM", "DFW-1", "week");
  json v = Volume(alice, "DFW-1", 2);
  std::string id = std::to_string(v["id"].get<long long>());
  auto snap = client_->Call("POST", "/v1/snapshots", {{"volume_id", v["id"]}}, alice);
  ASSERT_EQ(snap.status, 201);
  std::string sid = std::to_string(snap.Json()["id"].get<long long>());
  const std::string wallet = Usd(alice);
  const json volumes = Get("/v1/volumes", alice)["volumes"];
  const json snapshots = Get("/v1/snapshots", alice)["snapshots"];

  auto create = [&](const json& body) { return client_->Call("POST", "/v1/volumes", body, alice); };
  json ok = {{"region", "DFW-1"}, {"size_tb", 1}};
  auto with = [&](const std::string& field, const json& value) {
    json b = ok;
    b[field] = value;
    return b;
  };
  ExpectRefused(create(with("size_tb", 0)), 400, "size_tb");
  ExpectRefused(create(with("size_tb", -1)), 400, "size_tb");
  ExpectRefused(create(with("size_tb", 1.5)), 400, "size_tb");
  ExpectRefused(create(with("size_tb", "1")), 400, "size_tb");
  ExpectRefused(create(with("size_tb", 101)), 400, "size_tb");
  ExpectRefused(create(with("size_tb", 1e30)), 400, "size_tb");
  ExpectRefused(create(with("size_tb", 18446744073709551615ULL)), 400, "size_tb");
  ExpectRefused(create({{"region", "DFW-1"}}), 400, "size_tb");
  ExpectRefused(create({{"size_tb", 1}}), 400, "region");
  ExpectRefused(create(with("region", "MARS-1")), 400, "region");
  ExpectRefused(create(with("region", "dfw 1")), 400, "region");
  ExpectRefused(create(with("name", "no spaces")), 400, "name");
  ExpectRefused(create(with("currency", "BTC")), 400, "currency");
  ExpectRefused(create(with("replicas", 1)), 400, "replicas");
  ExpectRefused(create(with("size_tb", 99)), 409, "size_tb");  // three hosts of 100 TB: 98 free
  // Attaching across regions, to someone else's instance, to nothing.
  auto attach = [&](const json& rental) {
    return client_->Call("POST", "/v1/volumes/" + id + "/attach", {{"rental_id", rental}}, alice);
  };
  ExpectRefused(attach(iad), 400, "rental_id");
  ExpectRefused(attach(bobs), 404, "rental_id");
  ExpectRefused(attach(987654), 404, "rental_id");
  ExpectRefused(attach("1"), 400, "rental_id");
  ExpectRefused(client_->Call("POST", "/v1/volumes/" + id + "/detach", {{"rental_id", dfw}}, alice),
                404, "rental_id");
  // Shrinking, or not growing.
  auto resize = [&](const json& size) {
    return client_->Call("POST", "/v1/volumes/" + id + "/resize", {{"size_tb", size}}, alice);
  };
  ExpectRefused(resize(1), 400, "size_tb");
  ExpectRefused(resize(2), 400, "size_tb");
  ExpectRefused(resize(2.5), 400, "size_tb");
  ExpectRefused(resize(1000), 400, "size_tb");
  // Restoring into another region, or smaller than the snapshot.
  auto restore = [&](const json& body) {
    return client_->Call("POST", "/v1/snapshots/" + sid + "/restore", body, alice);
  };
  ExpectRefused(restore({{"region", "IAD-1"}}), 400, "region");
  ExpectRefused(restore({{"region", "NOWHERE-9"}}), 400, "region");
  ExpectRefused(restore({{"size_tb", 1}}), 400, "size_tb");
  ExpectRefused(restore({{"size_tb", 0}}), 400, "size_tb");
  // Snapshots of what is not yours, or of two things at once.
  ExpectRefused(client_->Call("POST", "/v1/snapshots", {{"rental_id", bobs}}, alice), 404,
                "rental_id");
  ExpectRefused(client_->Call("POST", "/v1/snapshots", {{"volume_id", v["id"]}}, bob), 404,
                "volume_id");
  ExpectRefused(client_->Call("POST", "/v1/snapshots",
                              {{"volume_id", v["id"]}, {"rental_id", dfw}}, alice),
                400, "");
  ExpectRefused(client_->Call("POST", "/v1/snapshots", json::object(), alice), 400, "volume_id");
  // Bob cannot see, change, pay or delete Alice's storage.
  EXPECT_EQ(client_->Call("GET", "/v1/volumes/" + id, nullptr, bob).status, 404);
  EXPECT_EQ(client_->Call("POST", "/v1/volumes/" + id + "/resize", {{"size_tb", 3}}, bob).status,
            404);
  EXPECT_EQ(client_->Call("POST", "/v1/volumes/" + id + "/attach", {{"rental_id", bobs}}, bob)
                .status,
            404);
  EXPECT_EQ(client_->Call("POST", "/v1/volumes/" + id + "/pay", nullptr, bob).status, 404);
  EXPECT_EQ(client_->Call("DELETE", "/v1/volumes/" + id, nullptr, bob).status, 404);
  EXPECT_EQ(client_->Call("GET", "/v1/snapshots/" + sid, nullptr, bob).status, 404);
  EXPECT_EQ(client_->Call("POST", "/v1/snapshots/" + sid + "/restore", json::object(), bob).status,
            404);
  EXPECT_EQ(client_->Call("DELETE", "/v1/snapshots/" + sid, nullptr, bob).status, 404);
  EXPECT_EQ(client_->Call("GET", "/v1/volumes/abc", nullptr, alice).status, 404);
  // Extra NVMe: fractional, absurd, zero, someone else's rental.
  auto nvme = [&](long long rental, const json& tb, const std::string& token) {
    return client_->Call("POST", "/v1/rentals/" + std::to_string(rental) + "/extra-nvme",
                         {{"add_tb", tb}}, token);
  };
  ExpectRefused(nvme(dfw, 0, alice), 400, "add_tb");
  ExpectRefused(nvme(dfw, 1.5, alice), 400, "add_tb");
  ExpectRefused(nvme(dfw, 31, alice), 400, "add_tb");
  EXPECT_EQ(nvme(bobs, 1, alice).status, 404);
  ExpectRefused(client_->Call("POST", "/v1/rentals",
                              {{"gpu", "H100 SXM"}, {"count", 1}, {"term", "week"},
                               {"extra_nvme_tb", 31}},
                              alice),
                400, "extra_nvme_tb");
  ExpectRefused(client_->Call("POST", "/v1/rentals/quote",
                              {{"gpu", "H100 SXM"}, {"count", 1}, {"term", "week"},
                               {"extra_nvme_tb", 0.5}}),
                400, "extra_nvme_tb");
  // Egress samples (admin): each bad one names its field; none of the request is recorded.
  auto egress = [&](const json& samples) {
    return client_->Call("POST", "/v1/admin/egress", {{"samples", samples}}, admin_);
  };
  json good = {{"rental_id", dfw}, {"at", "2020-01-01T00:00:00Z"}, {"bytes", 1000}};
  ExpectRefused(egress(json::array()), 400, "samples");
  ExpectRefused(egress({good, {{"rental_id", dfw}, {"at", "yesterday"}, {"bytes", 1}}}), 400,
                "samples[1].at");
  ExpectRefused(egress({{{"rental_id", dfw}, {"at", "2020-01-01T00:00:00Z"}, {"bytes", -1}}}),
                400, "samples[0].bytes");
  ExpectRefused(egress({{{"rental_id", dfw}, {"at", "2099-01-01T00:00:00Z"}, {"bytes", 1}}}),
                400, "samples[0].at");
  ExpectRefused(egress({good, {{"rental_id", 424242}, {"at", "2020-01-01T00:00:00Z"}, {"bytes", 1}}}),
                404, "samples[1].rental_id");
  EXPECT_EQ(client_->Call("POST", "/v1/admin/egress", {{"samples", {good}}}, alice).status, 403);
  EXPECT_EQ(Get("/v1/rentals/" + std::to_string(dfw), alice)["storage"]["egress"]["current"]
               ["samples"],
            0);

  // Nothing changed.
  EXPECT_EQ(Usd(alice), wallet);
  EXPECT_EQ(Get("/v1/volumes", alice)["volumes"], volumes);
  EXPECT_EQ(Get("/v1/snapshots", alice)["snapshots"], snapshots);
  ExpectConsistent();
}

TEST_P(StorageApiTest, AnUnpaidVolumeIsReadOnlyThenDetachedThenDeletedAtItsNotifiedTime) {
  StorageHosts();
  Node("A100 SXM", "DFW-1");
  std::string alice = SignUpAndLogIn(*client_, "alice");
  Credit("alice", "990.933333");  // one A100 month + 2 days of 1 TB (0.466667 + 0.466666)
  long long rental = Rent(alice, "A100 SXM", "DFW-1");
  json v = Volume(alice, "DFW-1", 1);
  std::string id = std::to_string(v["id"].get<long long>());
  ASSERT_EQ(client_->Call("POST", "/v1/volumes/" + id + "/attach", {{"rental_id", rental}}, alice)
                .status,
            200);
  Advance(kDaySeconds);  // day 2 paid
  EXPECT_EQ(Usd(alice), "0.000000");
  Advance(kDaySeconds);  // day 3 cannot be paid: read-only at once
  json detail = Get("/v1/volumes/" + id, alice);
  EXPECT_EQ(detail["state"], "read_only");
  EXPECT_EQ(detail["access"], "read_only");
  EXPECT_EQ(detail["attachments"].size(), 1u);  // the instance keeps reading
  json unpaid = detail["bill"]["unpaid"];
  ASSERT_TRUE(unpaid.is_object()) << detail.dump();
  EXPECT_EQ(unpaid["due"], "0.466667");
  const std::string since = unpaid["since"];
  const std::string detach_at = unpaid["detach_at"];
  const std::string delete_at = unpaid["delete_at"];
  auto notes = Get("/v1/notifications", alice)["notifications"];
  ASSERT_FALSE(notes.empty());
  EXPECT_EQ(notes[0]["type"], "storage.read_only");
  EXPECT_EQ(notes[0]["data"]["detach_at"], detach_at);
  EXPECT_EQ(notes[0]["data"]["delete_at"], delete_at);
  EXPECT_EQ(Get("/v1/rentals/" + std::to_string(rental), alice)["storage"]["volumes"][0]["access"],
            "read_only");
  // It cannot grow while unpaid; paying with an empty wallet is a 402 and changes nothing.
  EXPECT_EQ(client_->Call("POST", "/v1/volumes/" + id + "/resize", {{"size_tb", 2}}, alice).status,
            409);
  EXPECT_EQ(client_->Call("POST", "/v1/volumes/" + id + "/pay", nullptr, alice).status, 402);

  Restart();
  Advance(72 * 3600 - 1);  // one second before the detach
  EXPECT_EQ(Get("/v1/volumes/" + id, alice)["state"], "read_only");
  Advance(1);
  detail = Get("/v1/volumes/" + id, alice);
  EXPECT_EQ(detail["state"], "detached");
  EXPECT_EQ(detail["access"], "none");
  EXPECT_TRUE(detail["attachments"].empty());
  notes = Get("/v1/notifications", alice)["notifications"];
  EXPECT_EQ(notes[0]["type"], "storage.detached");
  EXPECT_EQ(notes[0]["data"]["delete_at"], delete_at);
  EXPECT_EQ(notes[0]["created_at"], detach_at);
  Advance(7 * kDaySeconds - 1);  // one second before the deletion
  EXPECT_EQ(Get("/v1/volumes/" + id, alice)["state"], "detached");
  Advance(1);
  detail = Get("/v1/volumes/" + id, alice);
  EXPECT_EQ(detail["state"], "deleted");
  EXPECT_EQ(detail["bill"]["delete_reason"], "unpaid");
  EXPECT_EQ(detail["bill"]["deleted_at"], delete_at);
  notes = Get("/v1/notifications", alice)["notifications"];
  EXPECT_EQ(notes[0]["type"], "storage.deleted");
  EXPECT_EQ(notes[0]["created_at"], delete_at);
  (void)since;
  ExpectConsistent();
}

TEST_P(StorageApiTest, PayingBeforeTheDeletionRestoresIt) {
  StorageHosts();
  std::string alice = SignUpAndLogIn(*client_, "alice");
  Credit("alice", "0.466667");
  json v = Volume(alice, "IAD-1", 1);
  std::string id = std::to_string(v["id"].get<long long>());
  Advance(kDaySeconds);
  EXPECT_EQ(Get("/v1/volumes/" + id, alice)["state"], "read_only");
  Advance(4 * kDaySeconds);  // detached at +72 h; now in day 6
  json detail = Get("/v1/volumes/" + id, alice);
  EXPECT_EQ(detail["state"], "detached");
  EXPECT_EQ(detail["bill"]["unpaid"]["due"], "2.333333");  // days 2..6
  Credit("alice", "10");
  auto paid = client_->Call("POST", "/v1/volumes/" + id + "/pay", nullptr, alice);
  ASSERT_EQ(paid.status, 200) << paid.body;
  EXPECT_EQ(paid.Json()["state"], "active");
  EXPECT_EQ(paid.Json()["bill"]["days_paid"], 6);
  EXPECT_EQ(Usd(alice), "7.666667");
  EXPECT_EQ(Get("/v1/notifications", alice)["notifications"][0]["type"], "storage.restored");
  // A snapshot left unpaid is restored by the hourly retry once the wallet is topped up.
  auto snap = client_->Call("POST", "/v1/snapshots", {{"volume_id", v["id"]}}, alice);
  ASSERT_EQ(snap.status, 201) << snap.body;
  std::string sid = std::to_string(snap.Json()["id"].get<long long>());
  auto spend = client_->Call("POST", "/v1/volumes", {{"region", "IAD-1"}, {"size_tb", 16}}, alice);
  ASSERT_EQ(spend.status, 201) << spend.body;  // 7.466667: the wallet is left with 0.0
  Advance(kDaySeconds);
  EXPECT_EQ(Get("/v1/snapshots/" + sid, alice)["state"], "read_only");
  EXPECT_EQ(Get("/v1/snapshots/" + sid, alice)["restorable"], false);
  EXPECT_EQ(client_->Call("POST", "/v1/snapshots/" + sid + "/restore", json::object(), alice)
                .status,
            409);
  Credit("alice", "100");
  Advance(3600);
  EXPECT_EQ(Get("/v1/snapshots/" + sid, alice)["state"], "active");
  ExpectConsistent();
}

TEST_P(StorageApiTest, EgressBeyondTheAllowanceIsChargedOnceEvenWhenSamplesAreResent) {
  Node("H100 SXM", "DFW-1");
  std::string alice = SignUpAndLogIn(*client_, "alice");
  Credit("alice", "476");
  long long rental = Rent(alice, "H100 SXM", "DFW-1", "week");
  std::string path = "/v1/rentals/" + std::to_string(rental);
  json meter = Get(path, alice)["storage"]["egress"]["current"];
  EXPECT_EQ(meter["included_bytes"], 4'666'666'666'667LL);  // 20 TB x 7/30, rounded up
  json samples = {{{"rental_id", rental}, {"at", "2020-01-01T00:00:00Z"}, {"bytes", 4'666'666'666'667LL}},
                  {{"rental_id", rental}, {"at", "2020-01-01T00:05:00Z"}, {"bytes", 2'500'000'001LL}}};
  auto r = client_->Call("POST", "/v1/admin/egress", {{"samples", samples}}, admin_);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["recorded"], 2);
  EXPECT_EQ(r.Json()["results"][1]["charged_gb"], 3);  // 2.500000001 GB over: 3 whole GB
  EXPECT_EQ(Usd(alice), "0.988000");                   // 476 - 475 - 3 x 0.004
  // The agent resends the same samples (a lost answer): nothing more is recorded or charged.
  auto again = client_->Call("POST", "/v1/admin/egress", {{"samples", samples}}, admin_);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.Json()["recorded"], 0);
  EXPECT_EQ(Usd(alice), "0.988000");
  Restart();
  again = client_->Call("POST", "/v1/admin/egress", {{"samples", samples}}, admin_);
  EXPECT_EQ(again.Json()["recorded"], 0);
  meter = Get(path, alice)["storage"]["egress"]["current"];
  EXPECT_EQ(meter["used_bytes"], 4'669'166'666'668LL);
  EXPECT_EQ(meter["billed_gb"], 3);
  EXPECT_EQ(meter["samples"], 2);
  // Beyond what the wallet holds, GB are owed, then charged once it is topped up.
  auto big = client_->Call("POST", "/v1/admin/egress",
                           {{"samples", {{{"rental_id", rental}, {"at", "2020-01-01T00:10:00Z"},
                                          {"bytes", 1'000'000'000'000LL}}}}},
                           admin_);
  ASSERT_EQ(big.status, 200) << big.body;
  EXPECT_EQ(big.Json()["results"][0]["owed_gb"], 1000);
  EXPECT_EQ(Get("/v1/notifications", alice)["notifications"][0]["type"], "rental.egress_unpaid");
  Credit("alice", "10");
  Advance(3600);
  meter = Get(path, alice)["storage"]["egress"]["current"];
  EXPECT_EQ(meter["billed_gb"], 1003);
  EXPECT_EQ(meter["owed_gb"], 0);
  EXPECT_EQ(Usd(alice), "6.988000");  // 10.988 - 1000 x 0.004
  ExpectConsistent();
}

TEST_P(StorageApiTest, ExtraNvmeAtTheOrderAndAddedToARunningRental) {
  Node("H100 SXM", "DFW-1");
  std::string alice = SignUpAndLogIn(*client_, "alice");
  Credit("alice", "20000");
  auto quote = client_->Call("POST", "/v1/rentals/quote",
                             {{"gpu", "H100 SXM"}, {"count", 8}, {"term", "week"},
                              {"extra_nvme_tb", 10}});
  ASSERT_EQ(quote.status, 200) << quote.body;
  EXPECT_EQ(quote.Json()["amount"]["net"], "3441.000000");
  EXPECT_EQ(quote.Json()["formula"],
            "8 x 475.000000 = 3800.000000; - 10% (380.000000) = 3420.000000; + 10 TB extra NVMe "
            "x 2.100000 = 3441.000000 USD net; + tax 0.000000 = 3441.000000 USD");
  long long r = Rent(alice, "H100 SXM", "DFW-1", "month", 12);
  std::string path = "/v1/rentals/" + std::to_string(r);
  json rental = Get(path, alice);
  EXPECT_EQ(rental["price"]["term_net"], "1798.000000");  // 1690 + 12 x 9
  EXPECT_EQ(rental["storage"]["extra_nvme_tb"], 12);
  EXPECT_EQ(rental["storage"]["extra_nvme_free_tb_on_node"], 18);
  // The node has 18 TB left: 19 more is refused, naming the field.
  ExpectRefused(client_->Call("POST", "/v1/rentals", {{"gpu", "H100 SXM"}, {"count", 1},
                                                     {"term", "week"}, {"extra_nvme_tb", 19}},
                              alice),
                409, "extra_nvme_tb");
  // Ten days in, 3 TB more: 3 x 9 x 20/30 = 18.
  Advance(10 * kDaySeconds);
  std::string before = Usd(alice);
  auto added = client_->Call("POST", path + "/extra-nvme", {{"add_tb", 3}}, alice);
  ASSERT_EQ(added.status, 200) << added.body;
  EXPECT_EQ(added.Json()["extra_nvme_tb"], 15);
  EXPECT_EQ(added.Json()["term_net"], "1825.000000");
  ASSERT_EQ(added.Json()["charges"].size(), 1u);
  EXPECT_EQ(added.Json()["charges"][0]["kind"], "extra_nvme");
  EXPECT_EQ(Micros(before) - Micros(Usd(alice)), 18'000'000);
  ExpectRefused(client_->Call("POST", path + "/extra-nvme", {{"add_tb", 16}}, alice), 400,
                "add_tb");  // 15 + 16 > 30
  // The renewal pays the cards and the 15 TB.
  auto renew = client_->Call("POST", path + "/renew", json::object(), alice);
  ASSERT_EQ(renew.status, 200) << renew.body;
  EXPECT_EQ(renew.Json()["renewal"]["amount"]["net"], "1825.000000");
  ExpectConsistent();
}

INSTANTIATE_TEST_SUITE_P(Backends, StorageApiTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gpuhub::testing
