// Invoice numbers under load and across SIGKILL, on SQLite and PostgreSQL: admins issue credit
// notes from several threads while customers order term rentals (an invoice each) and the clock
// crosses a month end (the tick issues a statement per account in between), and then
//   - every acknowledged number is unique and every series (invoices, credit notes, per year)
//     holds exactly 1..n: no gap, no repeat;
//   - killed mid-load and restarted, every acknowledged credit note is still there with its
//     amounts, the series are still gapless (a number taken is a number written, in the same
//     transaction), and the next number continues where the series stopped.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "billing_fixture.h"

namespace gpuhub::testing {
namespace {

constexpr int kCustomers = 12;
constexpr int kThreads = 6;

class BillingCrashTest : public BillingServerTest {
 protected:
  // 12 customers each renting one GPU, and last month's statements issued.
  void Load() {
    Provider(2);
    for (int c = 0; c < kCustomers; ++c) {
      names_.push_back(Customer("cust" + std::to_string(c), c % 3 == 0 ? "DE" : "FR", "100000"));
      Buy(names_.back(), 1);
    }
    AdvanceToNextMonth();
    invoices_ = Numbers("invoice");
    ASSERT_EQ(invoices_.size(), static_cast<std::size_t>(kCustomers)) << server_->Log();
  }
  // The numbers of every document of `kind` of every customer.
  std::vector<std::string> Numbers(const std::string& kind) {
    std::vector<std::string> out;
    for (const auto& name : names_) {
      // Every page (an idle machine issues thousands of notes: more than one page per customer).
      std::string path = "/v1/invoices?limit=500";
      for (;;) {
        json page = Get(path, name);  // kept alive: the loop walks into it
        for (const auto& d : page["invoices"]) {
          if (d["kind"] == kind) out.push_back(d["number"]);
        }
        if (page["next_before"].is_null()) break;
        path = "/v1/invoices?limit=500&before=" +
               std::to_string(page["next_before"].get<long long>());
      }
    }
    return out;
  }
  // Every series of `numbers` ("2027-000003", "CN-2027-000001", ...) is exactly 1..n.
  static void ExpectGapless(const std::vector<std::string>& numbers) {
    std::map<std::string, std::set<long long>> series;
    for (const auto& n : numbers) {
      std::size_t dash = n.rfind('-');
      ASSERT_NE(dash, std::string::npos) << n;
      EXPECT_TRUE(series[n.substr(0, dash)].insert(std::stoll(n.substr(dash + 1))).second)
          << n << " twice";
    }
    for (const auto& [prefix, seqs] : series) {
      EXPECT_EQ(*seqs.begin(), 1) << prefix;
      EXPECT_EQ(*seqs.rbegin(), static_cast<long long>(seqs.size())) << prefix << " has a gap";
    }
  }

  // Threads issuing small credit notes until Stop(); the acknowledged numbers -> their gross.
  struct IssuingLoad {
    std::atomic<bool> stop{false};
    std::map<std::string, std::string> acked;
    std::mutex mutex;
    std::vector<std::thread> threads;
    void Stop() {
      stop = true;
      for (auto& t : threads) t.join();
    }
  };
  void IssueCreditNotes(IssuingLoad& load) {
    for (int t = 0; t < kThreads; ++t) {
      load.threads.emplace_back([&, t] {
        std::mt19937 rng(77 + static_cast<unsigned>(t));
        HttpClient c(server_->port());
        std::string admin = LogInAdmin(c);  // its own session (the clock may outlive others)
        while (!load.stop) {
          const std::string& inv = invoices_[rng() % invoices_.size()];
          auto r = c.Call("POST", "/v1/admin/invoices/" + inv + "/credit-notes",
                          {{"reason", "load"}, {"amount", "0.01"}}, admin);
          if (r.status == 401) {
            admin = LogInAdmin(c);
          } else if (r.status == 201) {
            json n = r.Json()["credit_note"];
            std::lock_guard<std::mutex> lock(load.mutex);
            EXPECT_TRUE(load.acked.emplace(n["number"], n["gross"]).second)
                << n["number"] << " twice";
          } else if (r.status != 0 && r.status != 409 && r.status != 400) {
            ADD_FAILURE() << r.status << " " << r.body;
          }
        }
      });
    }
  }

  std::vector<std::string> names_;  // the customers
  std::vector<std::string> invoices_;
};

TEST_P(BillingCrashTest, NumbersStayGaplessAndUniqueUnderConcurrentIssuing) {
  Load();
  auto node = client_->Call("POST", "/v1/admin/nodes", {{"gpu", "H100 SXM"}, {"region", "DFW-1"}},
                            admin_);
  ASSERT_EQ(node.status, 201) << node.body;
  IssuingLoad load;
  IssueCreditNotes(load);
  // Term rentals ordered meanwhile: each order's invoice takes its number in the same series.
  std::set<std::string> rental_invoices;
  std::thread orders([&] {
    HttpClient c(server_->port());
    for (int i = 0; i < 8; ++i) {
      const std::string& name = names_[static_cast<std::size_t>(i) % names_.size()];
      auto r = c.Call("POST", "/v1/rentals",
                      {{"gpu", "H100 SXM"}, {"count", 1}, {"term", "week"}, {"auto_renew", false}},
                      LogIn(c, name, kPassword));
      ASSERT_EQ(r.status, 201) << r.body;
      EXPECT_TRUE(rental_invoices.insert(r.Json()["invoice"]["number"]).second);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  AdvanceToNextMonth();  // a statement per customer, numbered between the credit notes' commits
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  orders.join();
  load.Stop();
  const auto& acked = load.acked;
  std::printf("concurrent issuing: %zu credit notes and %zu rental invoices acknowledged\n",
              acked.size(), rental_invoices.size());
  EXPECT_GT(acked.size(), 20u);
  std::vector<std::string> notes = Numbers("credit_note");
  EXPECT_EQ(notes.size(), acked.size());
  for (const auto& n : notes) EXPECT_EQ(acked.count(n), 1u) << n;
  std::vector<std::string> all = Numbers("invoice");
  EXPECT_EQ(all.size(), 2u * kCustomers + rental_invoices.size());
  for (const auto& n : rental_invoices) {
    EXPECT_NE(std::find(all.begin(), all.end(), n), all.end()) << n;
  }
  all.insert(all.end(), notes.begin(), notes.end());
  ExpectGapless(all);
  ExpectInvariants();
  Restart();
  ExpectInvariants();
  EXPECT_EQ(Numbers("credit_note").size(), acked.size());
}

TEST_P(BillingCrashTest, AfterSigkillEveryAcknowledgedNumberIsThereAndNoneIsMissing) {
  Load();
  IssuingLoad load;
  IssueCreditNotes(load);
  std::thread clock([&, admin = admin_] {
    HttpClient c(server_->port());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    // Crosses the next month end while credit notes are being issued (may be cut by the kill).
    c.Call("POST", "/v1/admin/clock/advance", {{"seconds", 29 * 24 * 3600}}, admin);
    c.Call("POST", "/v1/admin/clock/advance", {{"seconds", 3 * 24 * 3600}}, LogInAdmin(c));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  server_->Kill();
  load.Stop();
  clock.join();
  const auto& acked = load.acked;
  std::printf("before SIGKILL: %zu credit notes acknowledged\n", acked.size());
  EXPECT_GT(acked.size(), 10u);
  Start();
  RefreshSessions();
  ExpectInvariants();
  std::vector<std::string> notes = Numbers("credit_note");
  EXPECT_GE(notes.size(), acked.size());  // some may have committed without their answer
  for (const auto& [number, gross] : acked) {
    auto r = client_->Call("GET", "/v1/admin/invoices/" + number, nullptr, admin_);
    ASSERT_EQ(r.status, 200) << number << " was acknowledged but is gone: " << r.body;
    EXPECT_EQ(r.Json()["gross"], gross);
  }
  std::vector<std::string> all = Numbers("invoice");
  all.insert(all.end(), notes.begin(), notes.end());
  ExpectGapless(all);
  // The series continue where they stopped.
  auto next = client_->Call("POST", "/v1/admin/invoices/" + invoices_[0] + "/credit-notes",
                            {{"reason", "after the crash"}, {"amount", "0.01"}}, admin_);
  ASSERT_EQ(next.status, 201) << next.body;
  all.push_back(next.Json()["credit_note"]["number"]);
  ExpectGapless(all);
}

INSTANTIATE_TEST_SUITE_P(Backends, BillingCrashTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gpuhub::testing
