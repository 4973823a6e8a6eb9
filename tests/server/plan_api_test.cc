// POST /v1/plan and GET /v1/use-cases/{use} on a real server (SQLite and PostgreSQL): they price
// spot on the live book (the asks a provider just listed), the term fleet on the catalog, and the
// CLI's `gpuhub plan --server URL` and `gpuhub catalog --use X --server URL` read the same book.
#include <gtest/gtest.h>

#include "harness.h"

namespace gpuhub::testing {
namespace {

class PlanApiTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    db_ = FreshDatabaseUrl(GetParam(), dir_);
    if (db_.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL case skipped";
    ServerOptions options;
    options.db = db_;
    server_ = std::make_unique<ServerProcess>(dir_, options);
    ASSERT_TRUE(server_->Start()) << server_->Log();
    client_ = std::make_unique<HttpClient>(server_->port());
  }
  // A machine of `gpus` cards with one ask for all of them, open `hours` from now.
  long long Offer(const std::string& provider, const char* gpu, int gpus, const char* price,
                  int hours) {
    auto m = client_->Call("POST", "/v1/machines", MachineJson(gpu, gpus), provider);
    EXPECT_EQ(m.status, 201) << m.body;
    auto a = client_->Call("POST", "/v1/asks",
                           AskJson(m.Json()["id"], price, UtcTimeFromNow(std::chrono::hours(hours))),
                           provider);
    EXPECT_EQ(a.status, 201) << a.body;
    return a.Json()["id"].get<long long>();
  }

  TempDir dir_;
  std::string db_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<HttpClient> client_;
};

json LoraJob(long long tokens) {
  return {{"model", "meta-llama/Llama-3.1-8B"}, {"workload", "lora"}, {"batch", 4},
          {"tokens", tokens}, {"gpu", "H100 SXM"}, {"top", 8}, {"explain", true}};
}

const json* Option(const json& plan, int count) {
  for (const auto& o : plan["options"]) {
    if (o["count"] == count) return &o;
  }
  return nullptr;
}

TEST_P(PlanApiTest, SpotIsPricedOnTheLiveBook) {
  std::string provider = SignUpAndLogIn(*client_, "paula", "correct horse battery staple",
                                        {"provider"});
  long long cheap = Offer(provider, "H100 SXM", 2, "2.100", 24 * 30);
  long long short_lived = Offer(provider, "H100 SXM", 8, "2.400", 2);
  auto r = client_->Call("POST", "/v1/plan", LoraJob(300'000'000));
  ASSERT_EQ(r.status, 200) << r.body;
  json plan = r.Json();
  EXPECT_EQ(plan["prices"], "market");
  EXPECT_EQ(plan["offers_considered"], 2);
  const json* one = Option(plan, 1);
  ASSERT_NE(one, nullptr) << plan.dump();
  EXPECT_EQ((*one)["spot"]["ask_id"], cheap);
  EXPECT_EQ((*one)["spot"]["exact"]["price_usd_per_gpu_hour"], "2.100");
  const long long hours = (*one)["spot"]["hours_billed"];
  EXPECT_EQ(Micros((*one)["spot"]["exact"]["total_usd"]), hours * 2'100'000);
  EXPECT_EQ((*one)["spot"]["outlasts_offer"], false);
  // Eight cards: only the short-lived ask has them; the ~1 h run outlasts none of its 2 hours.
  const json* eight = Option(plan, 8);
  ASSERT_NE(eight, nullptr) << plan.dump();
  EXPECT_EQ((*eight)["spot"]["ask_id"], short_lived);
  EXPECT_EQ((*eight)["spot"]["outlasts_offer"], false);
  // A job of ~25 hours on 8 cards outlasts the 2-hour ask: the plan says so.
  auto longer = client_->Call("POST", "/v1/plan", LoraJob(30'000'000'000));
  ASSERT_EQ(longer.status, 200) << longer.body;
  json longer_plan = longer.Json();  // Option points into it
  eight = Option(longer_plan, 8);
  ASSERT_NE(eight, nullptr);
  EXPECT_EQ((*eight)["spot"]["outlasts_offer"], true) << eight->dump();
  // The term price is there beside spot; the arithmetic comes with explain.
  EXPECT_TRUE((*one)["term"].is_object());
  EXPECT_GE((*one)["explain"].size(), 6u);

  // The CLI reads the same book and answers the same cheapest offer and total.
  std::string url = "http://127.0.0.1:" + std::to_string(server_->port());
  auto cli = RunGpuhub({"plan", "--model", "meta-llama/Llama-3.1-8B", "--workload", "lora",
                        "--batch", "4", "--tokens", "300000000", "--gpu", "H100 SXM", "--top",
                        "8", "--server", url, "--json"},
                       "");
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  json out = json::parse(cli.output, nullptr, false);
  ASSERT_FALSE(out.is_discarded()) << cli.output;
  EXPECT_EQ(out["prices"], "market");
  const json* cli_one = Option(out, 1);
  ASSERT_NE(cli_one, nullptr);
  EXPECT_EQ((*cli_one)["spot"]["ask_id"], cheap);
  EXPECT_EQ((*cli_one)["spot"]["exact"], (*one)["spot"]["exact"]);
}

TEST_P(PlanApiTest, BadRequestsNameTheField) {
  struct Case {
    json body;
    const char* field;
  };
  const Case cases[] = {
      {{{"model", "7b"}, {"workload", "lora"}}, "tokens"},
      {{{"model", "7b"}, {"workload", "lora"}, {"tokens", 5}, {"prices", "market"}}, "prices"},
      {{{"model", "7b"}, {"workload", "lora"}, {"tokens", "many"}}, "tokens"},
      {{{"model", "7b"}, {"workload", "lora"}, {"tokens", 5}, {"utilisation", 3}}, "utilisation"},
      {{{"model", "7b"}, {"workload", "infer"}}, "tokens_per_day"},
      {{{"model", "7b"}, {"workload", "infer"}, {"tokens_per_day", 9}, {"epochs", 2}}, "epochs"},
      {{{"model", "/etc/passwd"}, {"workload", "lora"}, {"tokens", 5}}, "model"},
  };
  for (const auto& c : cases) {
    auto r = client_->Call("POST", "/v1/plan", c.body);
    EXPECT_EQ(r.status, 400) << c.body.dump() << ": " << r.body;
    EXPECT_EQ(r.Json()["error"]["field"], c.field) << c.body.dump() << ": " << r.body;
  }
  auto text = client_->Send("POST", "/v1/plan", R"({"model":"7b","workload":"lora","tokens":5})",
                            {{"Content-Type", "text/plain"}});
  EXPECT_EQ(text.status, 400) << text.body;
  auto unknown = client_->Call("POST", "/v1/plan",
                               {{"model", "no-such/model"}, {"workload", "lora"}, {"tokens", 5}});
  EXPECT_EQ(unknown.status, 404) << unknown.body;
}

// The use-case views price spot at the book's best ask, live ("from $X/h").
TEST_P(PlanApiTest, UseCasesShowTheLiveBestAsk) {
  std::string provider = SignUpAndLogIn(*client_, "paula", "correct horse battery staple",
                                        {"provider"});
  Offer(provider, "A100 SXM", 4, "1.650", 48);
  Offer(provider, "A100 SXM", 2, "1.500", 48);
  for (const char* use : {"training", "fine-tuning", "inference"}) {
    auto r = client_->Call("GET", std::string("/v1/use-cases/") + use);
    ASSERT_EQ(r.status, 200) << use << ": " << r.body;
    json view = r.Json();
    EXPECT_EQ(view["use"], use);
    bool found = false;
    for (const auto& c : view["cards"]) {
      if (c["name"] == "A100 SXM") {
        found = true;
        EXPECT_EQ(c["spot"]["live"], true);
        EXPECT_EQ(c["spot"]["exact"]["from_usd_per_gpu_hour"], "1.500");
        EXPECT_EQ(c["spot"]["gpus_on_offer"], 6);
      }
      if (c["name"] == "H100 SXM") {
        EXPECT_TRUE(c["spot"]["from_usd_per_gpu_hour"].is_null()) << "no H100 offer on this book";
      }
    }
    EXPECT_TRUE(found) << use;
  }
  auto unknown = client_->Call("GET", "/v1/use-cases/pretraining");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_NE(unknown.body.find("training, fine-tuning, inference, image-video, rendering or science"),
            std::string::npos);
  // The CLI reads the same book.
  std::string url = "http://127.0.0.1:" + std::to_string(server_->port());
  auto cli = RunGpuhub({"catalog", "--use", "inference", "--server", url, "--json"}, "");
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  json out = json::parse(cli.output, nullptr, false);
  ASSERT_FALSE(out.is_discarded()) << cli.output;
  for (const auto& c : out["cards"]) {
    if (c["name"] == "A100 SXM") {
      EXPECT_EQ(c["spot"]["exact"]["from_usd_per_gpu_hour"], "1.500");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, PlanApiTest, ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
