// Storage beside term rentals, as worked examples with exact figures: extra local NVMe at the order
// and added to a running rental, network volumes (placement, daily bill, growth, attachments), the
// unpaid path step by step, snapshots and restores, egress metering, bad input, and restore from
// records.
#include "rentals/storage.h"

#include <gtest/gtest.h>

#include <set>

#include "ledger/ledger.h"

namespace gpuhub::rentals {
namespace {

using ledger::AccountKey;
using ledger::AccountKind;

constexpr TimestampMicros kStart = 1'800'000'000'000'000;  // 2027-01-15T08:00:00Z
constexpr std::int64_t kHour = kMicrosPerHour;
constexpr std::int64_t kDay = kMicrosPerDay;
constexpr UserId kAlice = 10, kBob = 11;

std::int64_t Usd(std::int64_t units) { return units * 1'000'000; }

FleetConfig Fleet8() {
  FleetConfig c;
  c.regions = {"DFW-1", "IAD-1", "PDX-1"};
  c.discounts = {{2, 50'000}, {4, 80'000}, {8, 100'000}};
  c.cards = {
      {"H100 SXM", Usd(1690), Usd(475), false, {1, 2, 4, 8}, c.regions, true, 2000},
      {"A100 SXM", Usd(990), Usd(280), false, {1, 2, 4, 8}, c.regions, false, 1000},
  };
  return c;
}

StorageConfig Storage3() {
  StorageConfig c;
  c.regions = {"DFW-1", "IAD-1", "PDX-1"};
  return c;
}

Result<TaxBlock> Untaxed(UserId, std::int64_t net, TimestampMicros) { return NoTax(net); }

class StorageTest : public ::testing::Test {
 protected:
  StorageTest() : fleet_(Fleet8()), storage_(Storage3()) {}

  void SetUp() override {
    for (const char* region : {"DFW-1", "IAD-1"}) {
      for (int i = 0; i < 4; ++i) {
        auto h = storage_.AddHost({region, "", 100}, now_, &sc_);
        ASSERT_TRUE(h.ok()) << h.status().ToString();
      }
    }
  }

  void TearDown() override { Check(); }

  void Check() {
    Status s = ledger_.CheckInvariants();
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = fleet_.CheckInvariants();
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = fleet_.CheckSettlement(ledger_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = storage_.CheckInvariants(fleet_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = storage_.CheckSettlement(ledger_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void Fund(UserId user, std::int64_t micros, Currency c = Currency::kUsd) {
    ledger::TransferRequest t;
    t.id = "topup:" + std::to_string(++topups_);
    t.debit = AccountKey::System(AccountKind::kDeposits, c);
    t.credit = AccountKey::Wallet(user, c);
    t.amount_micros = micros;
    t.code = "topup";
    t.timestamp = now_;
    ASSERT_TRUE(ledger_.Apply(t).ok());
  }
  std::int64_t Wallet(UserId u) {
    return ledger_.GetAccount(AccountKey::Wallet(u, Currency::kUsd))->available();
  }

  NodeId AddNode(const char* gpu, const char* region, std::optional<std::int64_t> extra = {}) {
    auto n = fleet_.AddNode({gpu, region, 0, "", std::nullopt, extra}, now_, &fc_);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? n->id : 0;
  }

  Result<Rental> Order(UserId who, const char* gpu, int count, Term term, const char* region,
                       std::int64_t extra_tb = 0) {
    OrderSpec s;
    s.gpu = gpu;
    s.count = count;
    s.term = term;
    s.region = region;
    s.extra_nvme_tb = extra_tb;
    return fleet_.Order(who, s, ledger_, Untaxed, now_, &fc_);
  }

  Result<Volume> Create(UserId who, const char* region, std::int64_t tb, const char* name = "") {
    return storage_.CreateVolume(who, {region, tb, name, Currency::kUsd}, ledger_, Untaxed, now_,
                                 &sc_);
  }

  void Advance(std::int64_t micros) {
    now_ += micros;
    fc_.Clear();
    fleet_.AdvanceTo(ledger_, Untaxed, now_, &fc_);
    storage_.SyncRentals(fleet_, fc_.rentals, now_, &sc_);
    storage_.AdvanceTo(ledger_, Untaxed, now_, &sc_);
  }

  std::vector<StorageNotice> NoticesOf(const std::string& kind) {
    std::vector<StorageNotice> out;
    for (const auto& n : sc_.notices) {
      if (n.kind == kind) out.push_back(n);
    }
    return out;
  }

  Fleet fleet_;
  Storage storage_;
  ledger::Ledger ledger_;
  Changes fc_;
  StorageChanges sc_;
  TimestampMicros now_ = kStart;
  int topups_ = 0;
};

// ----- Prices ----------------------------------------------------------------------------------

TEST(StoragePricesTest, ThirtyDaysOfOneSizeCostExactlyTheMonthlyPrice) {
  // 1 TB at $14: 14,000,000 / 30 = 466,666.67 per day, rounded so that the days add up.
  EXPECT_EQ(Storage::DayMicros(14'000'000, 1, 1), 466'667);
  EXPECT_EQ(Storage::DayMicros(14'000'000, 1, 2), 466'666);
  EXPECT_EQ(Storage::DayMicros(14'000'000, 1, 3), 466'667);
  for (std::int64_t size : {1, 3, 7, 100}) {
    for (std::int64_t from : {1, 2, 17, 365}) {
      std::int64_t sum = 0;
      for (std::int64_t d = from; d < from + 30; ++d) sum += Storage::DayMicros(14'000'000, size, d);
      EXPECT_EQ(sum, 14'000'000 * size) << size << " TB from day " << from;
      sum = 0;
      for (std::int64_t d = from; d < from + 30; ++d) sum += Storage::DayMicros(6'000'000, size, d);
      EXPECT_EQ(sum, 6'000'000 * size);
    }
  }
  Storage s(Storage3());
  EXPECT_EQ(s.EgressAllowanceBytes(Term::kMonth), 20'000'000'000'000);
  // 20 TB x 7/30 = 4,666,666,666,666.67 bytes, rounded up.
  EXPECT_EQ(s.EgressAllowanceBytes(Term::kWeek), 4'666'666'666'667);
}

// ----- Extra local NVMe --------------------------------------------------------------------------

TEST_F(StorageTest, ExtraNvmeAtTheOrderIsPricedPerTermAndTakenFromTheNode) {
  NodeId node = AddNode("H100 SXM", "DFW-1");
  Fund(kAlice, Usd(20'000));
  auto quote = fleet_.QuoteOrder(kAlice, [] {
    OrderSpec s;
    s.gpu = "H100 SXM";
    s.count = 8;
    s.term = Term::kWeek;
    s.extra_nvme_tb = 10;
    return s;
  }(), ledger_, Untaxed, now_);
  ASSERT_TRUE(quote.ok());
  // A week pays 7/30 of $9 per TB: $2.10 per TB, $21 for 10 TB; the cards 8 x 475 - 10%.
  EXPECT_EQ(quote->extra_nvme_micros_per_tb, 2'100'000);
  EXPECT_EQ(quote->extra_nvme_micros, Usd(21));
  EXPECT_EQ(quote->cards_net_micros, Usd(3420));
  EXPECT_EQ(quote->amount.net_micros, Usd(3441));
  auto r = Order(kAlice, "H100 SXM", 8, Term::kWeek, "DFW-1", 10);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->extra_nvme_gb, 10'000);
  EXPECT_EQ(r->instance.nvme_gb, 16'000);  // 2 TB included per card
  EXPECT_EQ(Wallet(kAlice), Usd(20'000 - 3441));
  EXPECT_EQ(fleet_.ExtraNvmeSoldGb(node), 10'000);
  EXPECT_EQ(fleet_.ExtraNvmeFreeGb(node), 20'000);
  // The renewal pays the same: cards and NVMe.
  auto renewal = fleet_.PayRenewal(kAlice, r->id, std::nullopt, ledger_, Untaxed, now_, &fc_);
  ASSERT_TRUE(renewal.ok());
  EXPECT_EQ(renewal->amount.net_micros, Usd(3441));
  auto charges = fleet_.ChargesOf(r->id);
  ASSERT_EQ(charges.size(), 2u);
  EXPECT_EQ(charges[1].extra_nvme_micros, Usd(21));
  EXPECT_EQ(charges[1].extra_nvme_gb, 10'000);
}

TEST_F(StorageTest, ANodesExtraNvmeIsNeverOversold) {
  // Two nodes: one declares 12 TB of extra NVMe, the other 40 TB (of which 30 are sold).
  NodeId small = AddNode("A100 SXM", "DFW-1", 12'000);
  NodeId big = AddNode("A100 SXM", "DFW-1", 40'000);
  Fund(kAlice, Usd(100'000));
  auto a = Order(kAlice, "A100 SXM", 1, Term::kMonth, "DFW-1", 10);
  ASSERT_TRUE(a.ok());
  auto b = Order(kAlice, "A100 SXM", 1, Term::kMonth, "DFW-1", 10);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(a->node_id, b->node_id) << "10 + 10 TB does not fit the 12 TB node";
  auto c = Order(kAlice, "A100 SXM", 1, Term::kMonth, "DFW-1", 20);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->node_id, big);  // 10 + 20 = 30 TB: its whole sellable extra
  // 31 TB is bad input whatever the stock; 3 TB more has no node left with it.
  auto too_much = Order(kAlice, "A100 SXM", 1, Term::kMonth, "DFW-1", 31);
  EXPECT_EQ(too_much.status().field(), "extra_nvme_tb");
  EXPECT_EQ(too_much.status().code(), StatusCode::kInvalidArgument);
  auto none = Order(kAlice, "A100 SXM", 1, Term::kMonth, "DFW-1", 3);
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(none.status().field(), "extra_nvme_tb");
  EXPECT_EQ(fleet_.ExtraNvmeSoldGb(small) + fleet_.ExtraNvmeSoldGb(big), 40'000);
  EXPECT_EQ(fleet_.ExtraNvmeFreeGb(big), 0);
  EXPECT_EQ(fleet_.ExtraNvmeFreeGb(small), 2'000);
  // Adding to a running rental is bound by the same capacity.
  auto add = fleet_.AddExtraNvme(kAlice, a->node_id == small ? a->id : b->id, 3, ledger_, Untaxed,
                                 now_, &fc_);
  EXPECT_EQ(add.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(add.status().field(), "add_tb");
  // Released, the NVMe is back for sale.
  ASSERT_TRUE(fleet_.Release(kAlice, c->id, ledger_, now_, &fc_).ok());
  EXPECT_EQ(fleet_.ExtraNvmeFreeGb(big), 20'000);
}

TEST_F(StorageTest, ExtraNvmeAddedToARunningRentalIsProratedToTheTermEnd) {
  AddNode("H100 SXM", "DFW-1");
  Fund(kAlice, Usd(20'000));
  auto r = Order(kAlice, "H100 SXM", 1, Term::kMonth, "DFW-1");
  ASSERT_TRUE(r.ok());
  Advance(10 * kDay);  // 20 of 30 days left
  const std::int64_t before = Wallet(kAlice);
  auto added = fleet_.AddExtraNvme(kAlice, r->id, 3, ledger_, Untaxed, now_, &fc_);
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  // 3 TB x $9 x 20/30 = $18.
  EXPECT_EQ(before - Wallet(kAlice), Usd(18));
  EXPECT_EQ(added->extra_nvme_gb, 3'000);
  EXPECT_EQ(added->extra_nvme_micros, Usd(27));
  // Someone else's rental looks missing; 0 TB is bad input.
  EXPECT_EQ(fleet_.AddExtraNvme(kBob, r->id, 1, ledger_, Untaxed, now_, &fc_).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(fleet_.AddExtraNvme(kAlice, r->id, 0, ledger_, Untaxed, now_, &fc_).status().field(),
            "add_tb");
  // The next term costs the card and the 3 TB: 1,690 + 27.
  auto renewal = fleet_.PayRenewal(kAlice, r->id, std::nullopt, ledger_, Untaxed, now_, &fc_);
  ASSERT_TRUE(renewal.ok());
  EXPECT_EQ(renewal->amount.net_micros, Usd(1717));
  // With the next term paid, 1 TB more pays the rest of this term ($9 x 20/30 = $6) and the whole
  // next term of it ($9); released before that term starts, what it paid for that term returns.
  const std::int64_t w = Wallet(kAlice);
  ASSERT_TRUE(fleet_.AddExtraNvme(kAlice, r->id, 1, ledger_, Untaxed, now_, &fc_).ok());
  EXPECT_EQ(w - Wallet(kAlice), Usd(15));
  const std::int64_t w2 = Wallet(kAlice);
  ASSERT_TRUE(fleet_.Release(kAlice, r->id, ledger_, now_, &fc_).ok());
  // Refunded: the paid next term (1,717) and its extra TB (9); not what ran.
  EXPECT_EQ(Wallet(kAlice) - w2, Usd(1726));
}

// ----- Network volumes -------------------------------------------------------------------------

TEST_F(StorageTest, AVolumeIsPlacedOnThreeDistinctHostsOfItsRegionAndPaysItsFirstDay) {
  Fund(kAlice, Usd(100));
  auto v = Create(kAlice, "dfw-1", 4, "ckpt");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->region, "DFW-1");
  ASSERT_EQ(v->hosts.size(), 3u);
  std::set<StorageHostId> distinct(v->hosts.begin(), v->hosts.end());
  EXPECT_EQ(distinct.size(), 3u);
  for (auto h : v->hosts) {
    EXPECT_EQ(storage_.FindHost(h)->region, "DFW-1");
    EXPECT_EQ(storage_.HostUsedTb(h), 4);
  }
  // 4 TB x $14 / 30 = $1.866667 for day 1.
  EXPECT_EQ(Wallet(kAlice), Usd(100) - 1'866'667);
  EXPECT_EQ(v->bill.days_paid, 1);
  // The next day is billed when it starts: R(56 x 2/30) - R(56/30) = 3.733333 - 1.866667.
  Advance(kDay);
  EXPECT_EQ(Wallet(kAlice), Usd(100) - 3'733'333);
  EXPECT_EQ(storage_.FindVolume(v->id)->bill.days_paid, 2);
  // A region whose hosts cannot hold three copies refuses, naming the size.
  auto huge = Create(kAlice, "DFW-1", 99);
  EXPECT_EQ(huge.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(huge.status().field(), "size_tb");
  // PDX-1 has no storage hosts at all.
  EXPECT_EQ(Create(kAlice, "PDX-1", 1).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(StorageTest, BadInputNamesTheFieldAndChangesNothing) {
  AddNode("H100 SXM", "DFW-1");
  AddNode("H100 SXM", "IAD-1");
  Fund(kAlice, Usd(10'000));
  Fund(kBob, Usd(10'000));
  auto dfw = Order(kAlice, "H100 SXM", 1, Term::kMonth, "DFW-1");
  auto iad = Order(kAlice, "H100 SXM", 1, Term::kMonth, "IAD-1");
  auto bobs = Order(kBob, "H100 SXM", 1, Term::kMonth, "DFW-1");
  ASSERT_TRUE(dfw.ok() && iad.ok() && bobs.ok());
  auto v = Create(kAlice, "DFW-1", 2);
  ASSERT_TRUE(v.ok());
  const auto transfers = ledger_.LastSequence();
  const auto volumes = storage_.volume_count();
  struct Case {
    Status status;
    StatusCode code;
    const char* field;
  };
  const Case cases[] = {
      {Create(kAlice, "DFW-1", 0).status(), StatusCode::kInvalidArgument, "size_tb"},
      {Create(kAlice, "DFW-1", -3).status(), StatusCode::kInvalidArgument, "size_tb"},
      {Create(kAlice, "DFW-1", 1'000'000).status(), StatusCode::kInvalidArgument, "size_tb"},
      {Create(kAlice, "MARS-1", 1).status(), StatusCode::kInvalidArgument, "region"},
      {Create(kAlice, "DFW 1", 1).status(), StatusCode::kInvalidArgument, "region"},
      {Create(kAlice, "DFW-1", 1, "a b").status(), StatusCode::kInvalidArgument, "name"},
      {storage_.Attach(kAlice, v->id, iad->id, fleet_, now_, &sc_).status(),
       StatusCode::kInvalidArgument, "rental_id"},
      {storage_.Attach(kAlice, v->id, bobs->id, fleet_, now_, &sc_).status(),
       StatusCode::kNotFound, "rental_id"},
      {storage_.Attach(kAlice, v->id, 999, fleet_, now_, &sc_).status(), StatusCode::kNotFound,
       "rental_id"},
      {storage_.Detach(kAlice, v->id, dfw->id, now_, &sc_).status(), StatusCode::kNotFound,
       "rental_id"},
      {storage_.ResizeVolume(kAlice, v->id, 1, ledger_, Untaxed, now_, &sc_).status(),
       StatusCode::kInvalidArgument, "size_tb"},
      {storage_.ResizeVolume(kAlice, v->id, 2, ledger_, Untaxed, now_, &sc_).status(),
       StatusCode::kInvalidArgument, "size_tb"},
      {storage_.ResizeVolume(kAlice, v->id, 101, ledger_, Untaxed, now_, &sc_).status(),
       StatusCode::kInvalidArgument, "size_tb"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(c.status.code(), c.code) << c.status.ToString();
    EXPECT_EQ(c.status.field(), c.field) << c.status.ToString();
  }
  // Bob cannot see, resize, attach, snapshot or delete Alice's volume.
  EXPECT_EQ(storage_.ResizeVolume(kBob, v->id, 3, ledger_, Untaxed, now_, &sc_).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(storage_.Attach(kBob, v->id, bobs->id, fleet_, now_, &sc_).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(storage_.DeleteVolume(kBob, v->id, now_, &sc_).status().code(),
            StatusCode::kNotFound);
  auto snap = storage_.CreateSnapshot(kBob, {SnapshotSource::kVolume, v->id, "", std::nullopt},
                                      fleet_, ledger_, Untaxed, now_, &sc_);
  EXPECT_EQ(snap.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(snap.status().field(), "source_id");
  auto nvme = storage_.CreateSnapshot(kBob, {SnapshotSource::kLocalNvme, dfw->id, "", std::nullopt},
                                      fleet_, ledger_, Untaxed, now_, &sc_);
  EXPECT_EQ(nvme.status().field(), "source_id");
  // Nothing moved, nothing was created, the volume is as it was.
  EXPECT_EQ(ledger_.LastSequence(), transfers);
  EXPECT_EQ(storage_.volume_count(), volumes);
  EXPECT_EQ(storage_.snapshot_count(), 0u);
  EXPECT_EQ(storage_.FindVolume(v->id)->size_tb, 2);
  EXPECT_TRUE(storage_.FindVolume(v->id)->attachments.empty());
}

TEST_F(StorageTest, AVolumeAttachesToSeveralInstancesOfItsRegionAndSurvivesTheirRelease) {
  AddNode("H100 SXM", "DFW-1");
  Fund(kAlice, Usd(10'000));
  auto a = Order(kAlice, "H100 SXM", 1, Term::kMonth, "DFW-1");
  auto b = Order(kAlice, "H100 SXM", 2, Term::kMonth, "DFW-1");
  ASSERT_TRUE(a.ok() && b.ok());
  auto v = Create(kAlice, "DFW-1", 1);
  ASSERT_TRUE(v.ok());
  ASSERT_TRUE(storage_.Attach(kAlice, v->id, a->id, fleet_, now_, &sc_).ok());
  auto both = storage_.Attach(kAlice, v->id, b->id, fleet_, now_, &sc_);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->attachments, (std::vector<RentalId>{a->id, b->id}));
  EXPECT_NE(storage_.VolumeHistory(v->id).back().detail.find("concurrent writers"),
            std::string::npos);
  // Attached volumes are not deleted.
  EXPECT_EQ(storage_.DeleteVolume(kAlice, v->id, now_, &sc_).status().code(),
            StatusCode::kFailedPrecondition);
  // Releasing rental a detaches it there; the volume and its other attachment stay.
  fc_.Clear();
  ASSERT_TRUE(fleet_.Release(kAlice, a->id, ledger_, now_, &fc_).ok());
  storage_.SyncRentals(fleet_, fc_.rentals, now_, &sc_);
  EXPECT_EQ(storage_.FindVolume(v->id)->attachments, (std::vector<RentalId>{b->id}));
  // Rental b runs out unpaid (auto-renew off via no money): released at T + 72 h; the volume
  // keeps being billed and survives.
  ASSERT_TRUE(fleet_.SetAutoRenew(kAlice, b->id, false, now_, &fc_).ok());
  Advance(30 * kDay + 73 * kHour);
  EXPECT_EQ(fleet_.FindRental(b->id)->state, RentalState::kReleased);
  EXPECT_TRUE(storage_.FindVolume(v->id)->attachments.empty());
  EXPECT_EQ(storage_.FindVolume(v->id)->bill.state, StorageState::kActive);
  // Detached, it can be deleted; no refund of the day paid.
  const std::int64_t w = Wallet(kAlice);
  ASSERT_TRUE(storage_.DeleteVolume(kAlice, v->id, now_, &sc_).ok());
  EXPECT_EQ(Wallet(kAlice), w);
  for (auto h : v->hosts) EXPECT_EQ(storage_.HostUsedTb(h), 0);
  Advance(3 * kDay);
  EXPECT_EQ(Wallet(kAlice), w);  // a deleted volume is not billed
}

TEST_F(StorageTest, GrowingPaysTheAddedTbForTheRestOfThePaidDay) {
  Fund(kAlice, Usd(100));
  auto v = Create(kAlice, "DFW-1", 1);
  ASSERT_TRUE(v.ok());
  Advance(6 * kHour);  // 18 h of day 1 left
  const std::int64_t w = Wallet(kAlice);
  auto grown = storage_.ResizeVolume(kAlice, v->id, 4, ledger_, Untaxed, now_, &sc_);
  ASSERT_TRUE(grown.ok()) << grown.status().ToString();
  // 3 TB x $14 x (18 h / 720 h) = $1.05.
  EXPECT_EQ(w - Wallet(kAlice), 1'050'000);
  EXPECT_EQ(grown->size_tb, 4);
  for (auto h : grown->hosts) EXPECT_EQ(storage_.HostUsedTb(h), 4);
  // Day 2 at 4 TB: R(56 x 2/30) - R(56/30) = 1.866666.
  Advance(18 * kHour);
  EXPECT_EQ(w - Wallet(kAlice), 1'050'000 + 1'866'666);
}

// ----- The unpaid path -------------------------------------------------------------------------

TEST_F(StorageTest, AnUnpaidVolumeTurnsReadOnlyThenDetachedThenDeletedEachAtItsNotifiedTime) {
  AddNode("H100 SXM", "DFW-1");
  Fund(kAlice, Usd(1690));
  auto r = Order(kAlice, "H100 SXM", 1, Term::kMonth, "DFW-1");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(Wallet(kAlice), 0);
  Fund(kAlice, 933'333);  // exactly days 1 and 2 of 1 TB
  auto v = Create(kAlice, "DFW-1", 1);
  ASSERT_TRUE(v.ok());
  ASSERT_TRUE(storage_.Attach(kAlice, v->id, r->id, fleet_, now_, &sc_).ok());
  Advance(kDay);  // day 2 paid
  EXPECT_EQ(Wallet(kAlice), 0);
  sc_.Clear();
  const TimestampMicros t = kStart + 2 * kDay;
  Advance(kDay);  // day 3 cannot be paid
  const Volume* vol = storage_.FindVolume(v->id);
  EXPECT_EQ(vol->bill.state, StorageState::kReadOnly);
  EXPECT_EQ(vol->bill.unpaid_since, t);
  EXPECT_EQ(vol->attachments, (std::vector<RentalId>{r->id}));  // instances keep reading
  auto read_only = NoticesOf("storage.read_only");
  ASSERT_EQ(read_only.size(), 1u);
  EXPECT_EQ(read_only[0].at, t);
  std::map<std::string, std::string> data(read_only[0].data.begin(), read_only[0].data.end());
  EXPECT_EQ(data["detach_at"], FormatTimestamp(t + 72 * kHour));
  EXPECT_EQ(data["delete_at"], FormatTimestamp(t + 72 * kHour + 7 * kDay));
  EXPECT_EQ(storage_.Next(vol->bill).what, "retry");
  EXPECT_EQ(storage_.DueMicros(vol->bill, 1, now_), 466'667);  // day 3
  // Writes to it are refused: it cannot grow or be attached elsewhere while unpaid.
  EXPECT_EQ(storage_.ResizeVolume(kAlice, v->id, 2, ledger_, Untaxed, now_, &sc_).status().code(),
            StatusCode::kFailedPrecondition);
  // Hourly retries fail quietly; at T + 72 h it is detached.
  Advance(72 * kHour - 1);
  EXPECT_EQ(storage_.FindVolume(v->id)->bill.state, StorageState::kReadOnly);
  sc_.Clear();
  Advance(1);
  vol = storage_.FindVolume(v->id);
  EXPECT_EQ(vol->bill.state, StorageState::kDetached);
  EXPECT_TRUE(vol->attachments.empty());
  ASSERT_EQ(NoticesOf("storage.detached").size(), 1u);
  EXPECT_EQ(NoticesOf("storage.detached")[0].at, t + 72 * kHour);
  // One microsecond before the notified deletion it is still there...
  Advance(7 * kDay - 1);
  EXPECT_EQ(storage_.FindVolume(v->id)->bill.state, StorageState::kDetached);
  for (auto h : v->hosts) EXPECT_EQ(storage_.HostUsedTb(h), 1);
  // ...and at that time it is gone.
  sc_.Clear();
  Advance(1);
  vol = storage_.FindVolume(v->id);
  EXPECT_EQ(vol->bill.state, StorageState::kDeleted);
  EXPECT_EQ(vol->bill.deleted_at, t + 72 * kHour + 7 * kDay);
  EXPECT_EQ(vol->bill.delete_reason, DeleteReason::kUnpaid);
  ASSERT_EQ(NoticesOf("storage.deleted").size(), 1u);
  for (auto h : v->hosts) EXPECT_EQ(storage_.HostUsedTb(h), 0);
  EXPECT_EQ(Wallet(kAlice), 0);  // nothing was charged while unpaid
}

TEST_F(StorageTest, PayingBeforeTheDeletionRestoresAndPaysEveryDayMissed) {
  Fund(kAlice, 466'667);  // day 1 of 1 TB
  auto v = Create(kAlice, "DFW-1", 1);
  ASSERT_TRUE(v.ok());
  Advance(kDay);  // day 2 unpaid
  ASSERT_EQ(storage_.FindVolume(v->id)->bill.state, StorageState::kReadOnly);
  Advance(4 * kDay);  // detached at day 2 + 72 h; now in day 6
  ASSERT_EQ(storage_.FindVolume(v->id)->bill.state, StorageState::kDetached);
  // Paying by hand with an empty wallet: 402, nothing changes.
  auto refused = storage_.PayVolume(kAlice, v->id, ledger_, Untaxed, now_, &sc_);
  EXPECT_EQ(refused.status().code(), StatusCode::kInsufficientFunds);
  // Days 2..6: R(14 x 6/30) - R(14/30) = 2.8 - 0.466667 = 2.333333.
  EXPECT_EQ(storage_.DueMicros(storage_.FindVolume(v->id)->bill, 1, now_), 2'333'333);
  Fund(kAlice, Usd(10));
  sc_.Clear();
  auto paid = storage_.PayVolume(kAlice, v->id, ledger_, Untaxed, now_, &sc_);
  ASSERT_TRUE(paid.ok()) << paid.status().ToString();
  EXPECT_EQ(paid->bill.state, StorageState::kActive);
  EXPECT_EQ(paid->bill.days_paid, 6);
  EXPECT_EQ(Wallet(kAlice), Usd(10) - 2'333'333);
  ASSERT_EQ(NoticesOf("storage.restored").size(), 1u);
  // And billing goes on by the day.
  Advance(kDay);
  EXPECT_EQ(storage_.FindVolume(v->id)->bill.days_paid, 7);
}

TEST_F(StorageTest, ATopUpRestoresWithinTheHourThroughTheRetries) {
  Fund(kAlice, 200'000);  // day 1 of a 1 TB snapshot: 6/30 = 0.2
  AddNode("A100 SXM", "DFW-1");
  Fund(kAlice, Usd(990));
  auto r = Order(kAlice, "A100 SXM", 1, Term::kMonth, "DFW-1");
  ASSERT_TRUE(r.ok());
  auto s = storage_.CreateSnapshot(kAlice, {SnapshotSource::kLocalNvme, r->id, "", std::nullopt},
                                   fleet_, ledger_, Untaxed, now_, &sc_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->size_tb, 1);  // 1 TB included with one A100
  EXPECT_EQ(Wallet(kAlice), 0);
  Advance(kDay + 10 * kMicrosPerSecond);
  ASSERT_EQ(storage_.FindSnapshot(s->id)->bill.state, StorageState::kReadOnly);
  // Unpaid, it cannot be restored.
  auto restore = storage_.RestoreSnapshot(kAlice, s->id, {}, ledger_, Untaxed, now_, &sc_);
  EXPECT_EQ(restore.status().code(), StatusCode::kFailedPrecondition);
  Fund(kAlice, Usd(1));
  Advance(kHour);
  EXPECT_EQ(storage_.FindSnapshot(s->id)->bill.state, StorageState::kActive);
  EXPECT_EQ(Wallet(kAlice), Usd(1) - 200'000);
}

// ----- Snapshots and restores ------------------------------------------------------------------

TEST_F(StorageTest, ASnapshotRestoresAsANewVolumeInItsRegionOnly) {
  Fund(kAlice, Usd(100));
  auto v = Create(kAlice, "DFW-1", 3);
  ASSERT_TRUE(v.ok());
  const std::int64_t w = Wallet(kAlice);
  auto s = storage_.CreateSnapshot(kAlice, {SnapshotSource::kVolume, v->id, "before-h100",
                                            std::nullopt},
                                   fleet_, ledger_, Untaxed, now_, &sc_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->size_tb, 3);
  EXPECT_EQ(s->region, "DFW-1");
  EXPECT_EQ(w - Wallet(kAlice), 600'000);  // 3 TB x $6 / 30
  auto other = storage_.RestoreSnapshot(kAlice, s->id, {"IAD-1", std::nullopt, "", std::nullopt},
                                        ledger_, Untaxed, now_, &sc_);
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(other.status().field(), "region");
  auto smaller = storage_.RestoreSnapshot(kAlice, s->id, {"", 2, "", std::nullopt}, ledger_,
                                          Untaxed, now_, &sc_);
  EXPECT_EQ(smaller.status().field(), "size_tb");
  EXPECT_EQ(storage_.volume_count(), 1u);
  // The source can go; the snapshot stays restorable.
  ASSERT_TRUE(storage_.DeleteVolume(kAlice, v->id, now_, &sc_).ok());
  auto restored = storage_.RestoreSnapshot(kAlice, s->id, {"DFW-1", 5, "copy", std::nullopt},
                                           ledger_, Untaxed, now_, &sc_);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->restored_from, s->id);
  EXPECT_EQ(restored->size_tb, 5);
  EXPECT_EQ(restored->region, "DFW-1");
  EXPECT_EQ(restored->bill.days_paid, 1);
}

// ----- Egress ----------------------------------------------------------------------------------

TEST_F(StorageTest, EgressBeyondTheAllowanceIsChargedByTheWholeGbOnce) {
  AddNode("H100 SXM", "DFW-1");
  Fund(kAlice, Usd(475));
  auto r = Order(kAlice, "H100 SXM", 1, Term::kWeek, "DFW-1");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(Wallet(kAlice), 0);
  const std::int64_t allowance = 4'666'666'666'667;
  auto sample = [&](TimestampMicros at, std::int64_t bytes) {
    return storage_.RecordEgress({r->id, at, bytes}, fleet_, ledger_, Untaxed, now_, &sc_);
  };
  // Within the allowance: metered, nothing charged.
  auto a = sample(now_ - 10, allowance - 1);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->charged_gb, 0);
  // 1 byte + 1.5 GB over: 2 GB owed; the wallet is empty, so they are owed.
  auto b = sample(now_ - 5, 1'500'000'002);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->owed_gb, 2);
  EXPECT_EQ(storage_.MetersOf(r->id)[0].billed_gb, 0);
  // A resent sample changes nothing.
  auto again = sample(now_ - 5, 1'500'000'002);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->recorded);
  EXPECT_EQ(storage_.MetersOf(r->id)[0].used_bytes, allowance + 1'500'000'001);
  // Topped up, the hourly retry charges the 2 GB: $0.008.
  Fund(kAlice, Usd(1));
  Advance(kHour);
  EXPECT_EQ(Wallet(kAlice), Usd(1) - 8'000);
  EXPECT_EQ(storage_.MetersOf(r->id)[0].billed_gb, 2);
  // 0.4 GB more stays within GB 2 (1.9 GB over in all): nothing; 0.2 GB more crosses into GB 3.
  auto c = sample(now_, 400'000'000);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->charged_gb, 0);
  auto d = sample(now_ + 1, 200'000'000);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->charged_gb, 1);
  EXPECT_EQ(Wallet(kAlice), Usd(1) - 12'000);
  // Bad samples name their field and change nothing.
  EXPECT_EQ(sample(now_ + 2, -1).status().field(), "bytes");
  EXPECT_EQ(sample(now_ + kHour, 1).status().field(), "at");
  EXPECT_EQ(storage_.RecordEgress({999, now_, 1}, fleet_, ledger_, Untaxed, now_, &sc_)
                .status()
                .field(),
            "rental_id");
}

// ----- Persistence -----------------------------------------------------------------------------

TEST_F(StorageTest, RestoreFromRecordsGivesTheSameStorage) {
  AddNode("H100 SXM", "DFW-1");
  Fund(kAlice, Usd(5000));
  auto r = Order(kAlice, "H100 SXM", 1, Term::kMonth, "DFW-1", 2);
  ASSERT_TRUE(r.ok());
  auto v = Create(kAlice, "DFW-1", 2, "data");
  ASSERT_TRUE(v.ok());
  ASSERT_TRUE(storage_.Attach(kAlice, v->id, r->id, fleet_, now_, &sc_).ok());
  ASSERT_TRUE(storage_.CreateSnapshot(kAlice, {SnapshotSource::kLocalNvme, r->id, "", std::nullopt},
                                      fleet_, ledger_, Untaxed, now_, &sc_)
                  .ok());
  ASSERT_TRUE(storage_.RecordEgress({r->id, now_, 21 * kBytesPerTb}, fleet_, ledger_, Untaxed,
                                    now_, &sc_)
                  .ok());
  Advance(3 * kDay);
  auto restored = Storage::Restore(Storage3(), storage_.Records());
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->NextEventAt(), storage_.NextEventAt());
  EXPECT_EQ(*restored->FindVolume(v->id), *storage_.FindVolume(v->id));
  EXPECT_EQ(restored->VolumeHistory(v->id), storage_.VolumeHistory(v->id));
  EXPECT_EQ(restored->MetersOf(r->id), storage_.MetersOf(r->id));
  EXPECT_TRUE(restored->CheckInvariants(fleet_).ok());
  EXPECT_TRUE(restored->CheckSettlement(ledger_).ok());
  auto fleet = Fleet::Restore(Fleet8(), fleet_.Records());
  ASSERT_TRUE(fleet.ok()) << fleet.status().ToString();
  EXPECT_EQ(fleet->ExtraNvmeSoldGb(r->node_id), 2'000);
}

}  // namespace
}  // namespace gpuhub::rentals
