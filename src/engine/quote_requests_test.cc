#include "engine/quote_requests.h"

#include <gtest/gtest.h>

#include "engine/accounts.h"
#include "engine/engine_test_fixture.h"
#include "engine/invariants.h"
#include "engine/limits.h"
#include "engine/notifications.h"

namespace gpuhub::engine {
namespace {

constexpr TimestampMicros kStart = 1'700'000'000'000'000;

class QuoteRequestsTest : public EngineOnSqliteTest {
 protected:
  QuoteRequestsTest() : EngineOnSqliteTest(kStart, "gpuhub_quote_requests") {}
  void SetUp() override {
    OpenEngine();
    alice_ = Run<User>([](Txn& txn) { return CreateUser(txn, "alice", "h", kRoleCustomer); });
    bob_ = Run<User>([](Txn& txn) { return CreateUser(txn, "bob", "h", kRoleCustomer); });
    admin_ = Run<User>([](Txn& txn) { return CreateUser(txn, "root", "h", kRoleAdmin); });
  }

  static QuoteRequestInput Job(std::string contact = "@alice:matrix.org") {
    QuoteRequestInput in;
    in.model = "405b";
    in.workload = "full";
    in.required_bytes = 7'452'000'000'000;
    in.summary = "405b full: 7,452 GB, 5 nodes of 8x MI300X";
    in.job_json = R"({"model":"405b","workload":"full"})";
    in.sizing_json = R"({"required_gb":7452})";
    in.contact = std::move(contact);
    in.note = "Three months,\nstarting in July.";
    return in;
  }
  Result<QuoteRequest> Create(const User& u, QuoteRequestInput in = Job()) {
    return engine_->ExecuteSync<QuoteRequest>(
        [&](Txn& txn) { return CreateQuoteRequest(txn, u.id, in); });
  }
  Result<QuoteRequest> Answer(std::int64_t id, QuoteAnswer a) {
    return engine_->ExecuteSync<QuoteRequest>(
        [&](Txn& txn) { return AnswerQuoteRequest(txn, admin_.id, id, a); });
  }
  User alice_, bob_, admin_;
};

TEST_F(QuoteRequestsTest, CreatedOpenListedAndKeptAcrossARestart) {
  auto q = Create(alice_);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->status, QuoteStatus::kOpen);
  EXPECT_EQ(q->created_at, kStart);
  OpenEngine();  // the state comes back from the database
  auto page = Run<QuoteRequestPage>([&](Txn& txn) -> Result<QuoteRequestPage> {
    return ListQuoteRequests(txn.state, alice_.id, 0, 50);
  });
  ASSERT_EQ(page.items.size(), 1u);
  const QuoteRequest& back = page.items[0];
  EXPECT_EQ(back.id, q->id);
  EXPECT_EQ(back.model, "405b");
  EXPECT_EQ(back.required_bytes, 7'452'000'000'000);
  EXPECT_EQ(back.contact, "@alice:matrix.org");
  EXPECT_EQ(back.note, "Three months,\nstarting in July.");
  EXPECT_EQ(back.sizing_json, R"({"required_gb":7452})");
  // Bob sees none of Alice's; every account's list (admins) has it.
  EXPECT_TRUE(Run<QuoteRequestPage>([&](Txn& txn) -> Result<QuoteRequestPage> {
                return ListQuoteRequests(txn.state, bob_.id, 0, 50);
              }).items.empty());
  EXPECT_EQ(Run<QuoteRequestPage>([&](Txn& txn) -> Result<QuoteRequestPage> {
              return ListQuoteRequests(txn.state, std::nullopt, 0, 50);
            }).items.size(),
            1u);
}

TEST_F(QuoteRequestsTest, TextsAreBoundedAndFreeOfControlCharacters) {
  // A contact is free text in any script, not an email address.
  EXPECT_TRUE(Create(alice_, Job("reply on the account")).ok());
  EXPECT_TRUE(Create(alice_, Job("Telegram: @Ölaf_77")).ok());
  EXPECT_EQ(Create(alice_, Job(std::string(kMaxQuoteContactBytes + 1, 'x'))).status().field(),
            "contact");
  EXPECT_EQ(Create(alice_, Job("line\nbreak")).status().field(), "contact");
  auto long_note = Job();
  long_note.note = std::string(kMaxQuoteNoteBytes + 1, 'n');
  EXPECT_EQ(Create(alice_, long_note).status().field(), "note");
  auto bell = Job();
  bell.note = "ding\a";
  EXPECT_EQ(Create(alice_, bell).status().field(), "note");
  auto empty = Job();
  empty.required_bytes = 0;
  EXPECT_EQ(Create(alice_, empty).status().field(), "job");
}

TEST_F(QuoteRequestsTest, OpenRequestsPerAccountAreLimited) {
  for (std::size_t i = 0; i < kMaxOpenQuoteRequestsPerAccount; ++i) {
    ASSERT_TRUE(Create(alice_).ok());
  }
  auto over = Create(alice_);
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find(std::to_string(kMaxOpenQuoteRequestsPerAccount)),
            std::string::npos);
  EXPECT_TRUE(Create(bob_).ok());  // another account's limit is its own
  // Withdrawing one frees its place; someone else cannot withdraw it (not theirs: not found).
  auto bob_try = engine_->ExecuteSync<QuoteRequest>(
      [&](Txn& txn) { return WithdrawQuoteRequest(txn, bob_.id, 1); });
  EXPECT_EQ(bob_try.status().code(), StatusCode::kNotFound);
  auto withdrawn = engine_->ExecuteSync<QuoteRequest>(
      [&](Txn& txn) { return WithdrawQuoteRequest(txn, alice_.id, 1); });
  ASSERT_TRUE(withdrawn.ok()) << withdrawn.status().ToString();
  EXPECT_EQ(withdrawn->status, QuoteStatus::kWithdrawn);
  EXPECT_TRUE(Create(alice_).ok());
  // A withdrawn request cannot be answered.
  EXPECT_EQ(Answer(1, {QuoteStatus::kAnswered, "$1", ""}).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(QuoteRequestsTest, AnAnswerNotifiesTheCustomerOnceAndOnlyOpenOnesAreAnswered) {
  auto q = Create(alice_);
  ASSERT_TRUE(q.ok());
  // Bad answers change nothing.
  EXPECT_EQ(Answer(q->id, {QuoteStatus::kAnswered, "", "no price"}).status().field(), "price");
  EXPECT_EQ(Answer(q->id, {QuoteStatus::kOpen, "$1", ""}).status().field(), "status");
  EXPECT_EQ(Answer(q->id, {QuoteStatus::kAnswered, "a\tb", ""}).status().field(), "price");
  EXPECT_EQ(Answer(999, {QuoteStatus::kAnswered, "$1", ""}).status().code(),
            StatusCode::kNotFound);
  auto answered =
      Answer(q->id, {QuoteStatus::kAnswered, "$61,200/month for 5 nodes", "3 months minimum"});
  ASSERT_TRUE(answered.ok()) << answered.status().ToString();
  EXPECT_EQ(answered->status, QuoteStatus::kAnswered);
  EXPECT_EQ(answered->answered_by, admin_.id);
  EXPECT_EQ(answered->answered_at, kStart);
  EXPECT_EQ(Answer(q->id, {QuoteStatus::kDeclined, "", "changed my mind"}).status().code(),
            StatusCode::kFailedPrecondition);
  auto notes = Run<NotificationPage>([&](Txn& txn) -> Result<NotificationPage> {
    return ListNotifications(txn.state, alice_.id, 0, 50);
  });
  ASSERT_EQ(notes.items.size(), 1u);
  EXPECT_EQ(notes.items[0].kind, "quote_request.answered");
  EXPECT_EQ(notes.items[0].subject, "quote_request:" + std::to_string(q->id));
  EXPECT_NE(notes.items[0].message.find("$61,200/month for 5 nodes"), std::string::npos);
  EXPECT_NE(notes.items[0].data_json.find("\"terms\":\"3 months minimum\""), std::string::npos)
      << notes.items[0].data_json;
  // Bob was told nothing.
  EXPECT_TRUE(Run<NotificationPage>([&](Txn& txn) -> Result<NotificationPage> {
                return ListNotifications(txn.state, bob_.id, 0, 50);
              }).items.empty());
  // Declining another: its own kind; the answer survives a restart.
  auto second = Create(alice_);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(Answer(second->id, {QuoteStatus::kDeclined, "", "no MI300X nodes free"}).ok());
  OpenEngine();
  auto page = Run<QuoteRequestPage>([&](Txn& txn) -> Result<QuoteRequestPage> {
    return ListQuoteRequests(txn.state, alice_.id, 0, 50);
  });
  ASSERT_EQ(page.items.size(), 2u);
  EXPECT_EQ(page.items[0].status, QuoteStatus::kDeclined);  // newest first
  EXPECT_EQ(page.items[0].terms, "no MI300X nodes free");
  EXPECT_EQ(page.items[1].price, "$61,200/month for 5 nodes");
  notes = Run<NotificationPage>([&](Txn& txn) -> Result<NotificationPage> {
    return ListNotifications(txn.state, alice_.id, 0, 50);
  });
  ASSERT_EQ(notes.items.size(), 2u);
  EXPECT_EQ(notes.items[0].kind, "quote_request.declined");
}

TEST_F(QuoteRequestsTest, PagesAndTheIndexInvariant) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Create(alice_).ok());
  ASSERT_TRUE(Answer(2, {QuoteStatus::kAnswered, "$9", ""}).ok());
  auto first = Run<QuoteRequestPage>([&](Txn& txn) -> Result<QuoteRequestPage> {
    return ListQuoteRequests(txn.state, alice_.id, 0, 2);
  });
  ASSERT_EQ(first.items.size(), 2u);
  EXPECT_EQ(first.items[0].id, 3);
  EXPECT_EQ(first.next_before, 2);
  auto rest = Run<QuoteRequestPage>([&](Txn& txn) -> Result<QuoteRequestPage> {
    return ListQuoteRequests(txn.state, alice_.id, first.next_before, 2);
  });
  ASSERT_EQ(rest.items.size(), 1u);
  EXPECT_EQ(rest.items[0].id, 1);
  EXPECT_EQ(rest.next_before, 0);
  auto open = Run<QuoteRequestPage>([&](Txn& txn) -> Result<QuoteRequestPage> {
    return ListQuoteRequests(txn.state, std::nullopt, 0, 50, QuoteStatus::kOpen);
  });
  EXPECT_EQ(open.items.size(), 2u);
  auto report = Run<InvariantReport>([&](Txn& txn) -> Result<InvariantReport> {
    return CheckStateInvariants(txn.state, txn.now, false);
  });
  EXPECT_TRUE(report.ok()) << report.ToString();
}

}  // namespace
}  // namespace gpuhub::engine
