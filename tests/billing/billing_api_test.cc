// Billing through HTTP on a real server (manual clock) with SQLite and PostgreSQL: billing
// profiles and their errors, the country a purchase needs, spot hours taxed at the buyer's rate,
// the monthly statement with its JSON, printable page and PDF (read back with pdftotext: the same
// numbers), other users' documents, paging, admin tax rates and credit notes.
#include <set>

#include "billing_fixture.h"
#include "documents/pdf_text_for_tests.h"

namespace gpuhub::testing {
namespace {

// How documents print an amount: the exact decimals, at least 2 ("20.000000" -> "20.00").
std::string Printed(std::string amount) {
  std::size_t dot = amount.find('.');
  while (amount.size() > dot + 3 && amount.back() == '0') amount.pop_back();
  return amount;
}

class BillingApiTest : public BillingServerTest {};

TEST_P(BillingApiTest, AProfileIsValidatedFieldByFieldAndKeptAcrossRestarts) {
  std::string carl = Customer("carl", "");
  json empty = Get("/v1/billing-profile", carl);
  EXPECT_EQ(empty["complete"], false);
  EXPECT_TRUE(empty["billing_country"].is_null());
  struct Case {
    json body;
    const char* field;
  } cases[] = {
      {json::object(), "billing_country"},
      {{{"billing_country", ""}}, "billing_country"},
      {{{"billing_country", "XX"}}, "billing_country"},
      {{{"billing_country", 49}}, "billing_country"},
      {{{"billing_country", "DE"}, {"vat_id", "DE 123"}, {"business_name", "Acme"}}, "vat_id"},
      {{{"billing_country", "GB"}, {"vat_id", "DE123456789"}, {"business_name", "Acme"}}, "vat_id"},
      {{{"billing_country", "DE"}, {"vat_id", "DE123456789"}}, "business_name"},
      {{{"billing_country", "DE"}, {"address", std::string(400, 'a')}}, "address"},
      {{{"billing_country", "DE"}, {"iban", "x"}}, "iban"},
  };
  for (const auto& c : cases) {
    auto r = client_->Call("PUT", "/v1/billing-profile", c.body, T(carl));
    EXPECT_EQ(r.status, 400) << c.body.dump() << " " << r.body;
    EXPECT_EQ(r.Json()["error"]["field"], c.field) << c.body.dump() << " " << r.body;
  }
  auto ok = client_->Call("PUT", "/v1/billing-profile",
                          {{"billing_country", "de"},
                           {"business_name", "Carl GmbH"},
                           {"vat_id", "de 123 456 789"},
                           {"address", "Unter den Linden 1\n10117 Berlin"}},
                          T(carl));
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.Json()["billing_country"], "DE");
  EXPECT_EQ(ok.Json()["vat_id"], "DE123456789");
  // An EU business with a VAT id buying from a seller outside its country (here a US seller)
  // accounts for the VAT itself: reverse charge.
  EXPECT_EQ(ok.Json()["tax"]["reverse_charge"], true);
  EXPECT_EQ(ok.Json()["tax"]["rate_percent"], "0");
  Restart();
  json kept = Get("/v1/billing-profile", carl);
  EXPECT_EQ(kept["business_name"], "Carl GmbH");
  EXPECT_EQ(kept["address"], "Unter den Linden 1\n10117 Berlin");
  EXPECT_EQ(kept["complete"], true);
  EXPECT_EQ(client_->Call("GET", "/v1/billing-profile").status, 401);
}

TEST_P(BillingApiTest, APurchaseNeedsABillingCountryAndCarriesItsTax) {
  Provider();
  std::string nobody = Customer("nina", "");
  json refused = Buy(nobody, 1, 400);
  EXPECT_EQ(refused["error"]["field"], "billing_country");
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("PUT /v1/billing-profile"),
            std::string::npos);
  // Nothing was bought or held.
  EXPECT_TRUE(Get("/v1/leases", nobody)["leases"].empty());
  EXPECT_TRUE(Get("/v1/bids", nobody)["bids"].empty());

  std::string carl = Customer("carl", "DE", "100");
  Buy(carl, 2);  // without a CDN header
  json b = client_->Send("POST", "/v1/bids",
                         json{{"gpu", "H100 SXM"}, {"gpus", 2}, {"market", true}}.dump(),
                         {{"Authorization", "Bearer " + T(carl)},
                          {"Content-Type", "application/json"},
                          {"CF-IPCountry", "de"}})
               .Json();
  ASSERT_EQ(b["status"], "filled") << b.dump();
  EXPECT_EQ(b["tax"]["rate_percent"], "19");
  EXPECT_EQ(b["tax"]["hourly_net_usd"], "5.000000");
  EXPECT_EQ(b["tax"]["hourly_tax_usd"], "0.950000");
  EXPECT_EQ(b["tax"]["hourly_gross_usd"], "5.950000");
  EXPECT_EQ(b["lease"]["tax"]["hourly_gross_usd"], "5.950000");
  // Two leases (the first call too): 2 x 5.95 from 100.
  json wallets = Get("/v1/wallets", carl);
  EXPECT_EQ(wallets["wallets"][0]["available"], "88.100000");
  json profile = Get("/v1/billing-profile", carl);
  EXPECT_EQ(profile["evidence"]["billing_country"], "DE");
  EXPECT_EQ(profile["evidence"]["ip_address"], "127.0.0.1");
  EXPECT_EQ(profile["evidence"]["ip_country"], "DE");
  ExpectInvariants();
}

TEST_P(BillingApiTest, TheMonthlyStatementIsTheSameInJsonHtmlAndPdfAndOnlyItsOwnerSeesIt) {
  Provider();
  std::string carl = Customer("carl", "");
  ASSERT_EQ(client_
                ->Call("PUT", "/v1/billing-profile",
                       {{"billing_country", "DE"},
                        {"business_name", "Carl Rechenzentrum GmbH"},
                        {"address", "Unter den Linden 1\n10117 Berlin"}},
                       T(carl))
                .status,
            200);
  std::string dora = Customer("dora", "FR");
  Buy(carl, 2);
  Buy(dora, 1);
  Advance(3 * 3600);
  EXPECT_TRUE(Get("/v1/invoices", carl)["invoices"].empty());  // the month has not ended
  AdvanceToNextMonth();
  json list = Get("/v1/invoices", carl);
  ASSERT_EQ(list["invoices"].size(), 1u) << list.dump();
  std::string number = list["invoices"][0]["number"];
  json inv = Get("/v1/invoices/" + number, carl);
  EXPECT_EQ(inv["kind"], "invoice");
  EXPECT_EQ(inv["currency"], "USD");
  EXPECT_EQ(inv["seller"]["name"], "gpuhub Inc.");
  EXPECT_EQ(inv["seller"]["address"], "1 Main St\nDover, DE 19901");
  EXPECT_EQ(inv["buyer"]["name"], "Carl Rechenzentrum GmbH (carl)");
  EXPECT_EQ(inv["buyer"]["country"], "DE");
  EXPECT_EQ(inv["tax_by_rate"][0]["label"], "VAT 19% (DE)");
  ASSERT_EQ(inv["lines"].size(), 1u);
  const json& line = inv["lines"][0];
  long long hours = line["quantity"];
  EXPECT_GE(hours, 4);  // 3 hours advanced + the rest of the month, hour by hour
  EXPECT_EQ(Micros(line["net"]), hours * 5'000'000);
  EXPECT_EQ(Micros(line["tax"]), hours * 950'000);
  EXPECT_EQ(Micros(inv["gross"]), Micros(inv["net"]) + Micros(inv["tax"]));
  EXPECT_EQ(inv["evidence"]["billing_country"], "DE");

  // The printable page and the PDF say the same.
  auto html = client_->Call("GET", "/v1/invoices/" + number + ".html", nullptr, T(carl));
  ASSERT_EQ(html.status, 200);
  EXPECT_EQ(html.Header("content-type"), "text/html; charset=utf-8");
  for (const std::string& s : {number, Printed(inv["net"]), Printed(inv["tax"]),
                               Printed(inv["gross"]), std::string("VAT 19% (DE)")}) {
    EXPECT_NE(html.body.find(s), std::string::npos) << s;
  }
  auto pdf = client_->Call("GET", "/v1/invoices/" + number + ".pdf", nullptr, T(carl));
  ASSERT_EQ(pdf.status, 200) << pdf.body.substr(0, 200);
  EXPECT_EQ(pdf.Header("content-type"), "application/pdf");
  EXPECT_EQ(pdf.body.rfind("%PDF-", 0), 0u);
  if (!documents::HavePdfToText()) {
    GTEST_SKIP() << "pdftotext (poppler-utils) is not installed";
  }
  std::string text = documents::PdfToText(pdf.body);
  ASSERT_FALSE(text.empty());
  std::vector<std::string> expected = {
      "Invoice " + number,
      inv["issued_at"].get<std::string>().substr(0, 10),
      "gpuhub Inc.",
      "1 Main St",
      "Carl Rechenzentrum GmbH (carl)",
      "10117 Berlin",
      "Germany (DE)",
      std::to_string(hours) + " lease-hours",
      Printed(line["unit_net"]),
      Printed(line["net"]),
      Printed(line["tax"]),
      Printed(line["gross"]),
      "19%",
      "VAT 19% (DE) on " + Printed(inv["net"]),
      Printed(inv["net"]) + " USD",
      Printed(inv["tax"]) + " USD",
      Printed(inv["gross"]) + " USD",
  };
  for (const auto& s : expected) EXPECT_NE(text.find(s), std::string::npos) << s << "\n" << text;

  // Someone else's number is not found, in every form; a malformed one neither.
  for (std::string suffix : {"", ".pdf", ".html"}) {
    auto theirs = client_->Call("GET", "/v1/invoices/" + number + suffix, nullptr, T(dora));
    EXPECT_EQ(theirs.status, 404) << suffix << theirs.body;
    EXPECT_EQ(client_->Call("GET", "/v1/invoices/" + number + suffix).status, 401);
  }
  EXPECT_EQ(client_->Call("GET", "/v1/invoices/../../etc", nullptr, T(carl)).status, 404);
  EXPECT_EQ(client_->Call("GET", "/v1/invoices/2026-1", nullptr, T(carl)).status, 404);
  EXPECT_EQ(client_->Call("GET", "/v1/admin/invoices/" + number, nullptr, T(carl)).status, 403);
  EXPECT_EQ(Get("/v1/admin/invoices/" + number, admin_)["number"], number);
  json dora_list = Get("/v1/invoices", dora);
  ASSERT_EQ(dora_list["invoices"].size(), 1u);
  EXPECT_NE(dora_list["invoices"][0]["number"], number);
  std::set<std::string> numbers = {number, dora_list["invoices"][0]["number"]};
  EXPECT_EQ(numbers.size(), 2u);
  Restart();
  EXPECT_EQ(Get("/v1/invoices/" + number, carl), inv);
  ExpectInvariants();
}

TEST_P(BillingApiTest, InvoicesArePagedByANamedLimit) {
  Provider();
  std::string carl = Customer("carl", "DE", "100000");
  Buy(carl, 1);
  for (int month = 0; month < 4; ++month) AdvanceToNextMonth();
  json all = Get("/v1/invoices", carl);
  ASSERT_EQ(all["invoices"].size(), 4u);
  EXPECT_TRUE(all["next_before"].is_null());
  json page = Get("/v1/invoices?limit=3", carl);
  ASSERT_EQ(page["invoices"].size(), 3u);
  EXPECT_EQ(page["invoices"][0], all["invoices"][0]);  // newest first
  json rest = Get("/v1/invoices?limit=3&before=" + page["next_before"].dump(), carl);
  ASSERT_EQ(rest["invoices"].size(), 1u);
  EXPECT_EQ(rest["invoices"][0], all["invoices"][3]);
  for (std::string bad : {"limit=0", "limit=501", "limit=x", "before=0", "before=x"}) {
    auto r = client_->Call("GET", "/v1/invoices?" + bad, nullptr, T(carl));
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(r.Json()["error"]["field"], bad.substr(0, bad.find('='))) << r.body;
  }
}

TEST_P(BillingApiTest, AdminsChangeRatesWithinZeroToHundredAndNeverIntoThePast) {
  std::string carl = Customer("carl", "DE");
  struct Case {
    json body;
    const char* field;
  } cases[] = {
      {{{"country", "DE"}, {"rate", "100.5"}}, "rate"},
      {{{"country", "DE"}, {"rate", "-1"}}, "rate"},
      {{{"country", "DE"}, {"rate", "19.12345"}}, "rate"},
      {{{"country", "DE"}, {"rate", "abc"}}, "rate"},
      {{{"country", "DE"}, {"rate", 19}}, "rate"},
      {{{"country", "DE"}}, "rate"},
      {{{"country", "XX"}, {"rate", "19"}}, "country"},
      {{{"rate", "19"}}, "country"},
      {{{"country", "DE"}, {"rate", "19"}, {"valid_from", "2020-01-01T00:00:00Z"}}, "valid_from"},
      {{{"country", "DE"}, {"rate", "19"}, {"valid_from", "soon"}}, "valid_from"},
      {{{"country", "DE"}, {"rate", "19"}, {"note", std::string(300, 'n')}}, "note"},
  };
  for (const auto& c : cases) {
    auto r = client_->Call("POST", "/v1/admin/tax-rates", c.body, admin_);
    EXPECT_EQ(r.status, 400) << c.body.dump() << " " << r.body;
    EXPECT_EQ(r.Json()["error"]["field"], c.field) << c.body.dump() << " " << r.body;
  }
  EXPECT_EQ(client_->Call("POST", "/v1/admin/tax-rates", {{"country", "DE"}, {"rate", "20"}}, T(carl))
                .status,
            403);
  TimestampMicros now = Advance(1);
  std::string later = FormatTimestamp(now + 2 * kMicrosPerDay);
  auto set = client_->Call("POST", "/v1/admin/tax-rates",
                           {{"country", "de"}, {"rate", "21.5"}, {"valid_from", later},
                            {"note", "test change"}},
                           admin_);
  ASSERT_EQ(set.status, 201) << set.body;
  EXPECT_EQ(set.Json()["rate_percent"], "21.5");
  EXPECT_EQ(Get("/v1/billing-profile", carl)["tax"]["rate_percent"], "19");
  json periods = Get("/v1/tax-rates?country=DE", "");
  ASSERT_EQ(periods["rates"].size(), 2u);
  EXPECT_EQ(periods["rates"][0]["valid_until"], later);
  json at = Get("/v1/tax-rates?at=" + later, "");
  bool found = false;
  for (const auto& r : at["rates"]) found = found || (r["country"] == "DE" && r["rate_percent"] == "21.5");
  EXPECT_TRUE(found);
  auto close = client_->Call("POST", "/v1/admin/tax-rates/NO/close", json::object(), admin_);
  ASSERT_EQ(close.status, 200) << close.body;
  EXPECT_EQ(client_->Call("POST", "/v1/admin/tax-rates/NO/close", json::object(), admin_).status,
            404);
  Restart();
  Advance(3 * 24 * 3600);
  EXPECT_EQ(Get("/v1/billing-profile", carl)["tax"]["rate_percent"], "21.5");
  EXPECT_EQ(Get("/v1/admin/tax-rates/changes", admin_)["changes"].size(), 2u);
}

TEST_P(BillingApiTest, CreditNotesHaveTheirOwnSeriesAndGiveTheMoneyBack) {
  Provider();
  std::string carl = Customer("carl", "DE");
  Buy(carl, 1);
  AdvanceToNextMonth();
  json inv = Get("/v1/invoices", carl)["invoices"][0];
  std::string number = inv["number"];
  std::string path = "/v1/admin/invoices/" + number + "/credit-notes";
  EXPECT_EQ(client_->Call("POST", path, {{"reason", "x"}}, T(carl)).status, 403);
  struct Case {
    json body;
    int status;
    const char* field;
  } cases[] = {{json::object(), 400, "reason"},
               {{{"reason", ""}}, 400, "reason"},
               {{{"reason", "x"}, {"amount", "0"}}, 400, "amount"},
               {{{"reason", "x"}, {"amount", "-1"}}, 400, "amount"},
               {{{"reason", "x"}, {"amount", 5}}, 400, "amount"},
               {{{"reason", "x"}, {"amount", "99999"}}, 400, "amount"}};
  for (const auto& c : cases) {
    auto r = client_->Call("POST", path, c.body, admin_);
    EXPECT_EQ(r.status, c.status) << c.body.dump() << " " << r.body;
    EXPECT_EQ(r.Json()["error"]["field"], c.field) << r.body;
  }
  EXPECT_EQ(client_->Call("POST", "/v1/admin/invoices/2026-999999/credit-notes", {{"reason", "x"}},
                          admin_)
                .status,
            404);
  auto part = client_->Call("POST", path, {{"reason", "an hour was down"}, {"amount", "2.50"}},
                            admin_);
  ASSERT_EQ(part.status, 201) << part.body;
  json note = part.Json()["credit_note"];
  EXPECT_EQ(note["kind"], "credit_note");
  EXPECT_EQ(note["number"].get<std::string>().rfind("CN-", 0), 0u);
  EXPECT_EQ(note["corrects"], number);
  EXPECT_EQ(note["net"], "2.500000");
  EXPECT_EQ(note["tax"], "0.475000");
  // Hours keep being charged while the lease runs: the credit transfers say what came back.
  auto transfers = AllTransfers(*client_, T(carl));
  long long credited = 0;
  for (const auto& t : transfers) {
    if (t["code"] == "credit_note") credited += Micros(t["amount"]);
  }
  EXPECT_EQ(credited, 2'975'000);
  auto rest = client_->Call("POST", path, {{"reason", "the rest"}}, admin_);
  ASSERT_EQ(rest.status, 201) << rest.body;
  EXPECT_EQ(Micros(rest.Json()["credit_note"]["gross"]) + 2'975'000, Micros(inv["gross"]));
  auto again = client_->Call("POST", path, {{"reason", "again"}}, admin_);
  EXPECT_EQ(again.status, 409) << again.body;
  json mine = Get("/v1/invoices", carl);
  EXPECT_EQ(mine["invoices"].size(), 3u);
  EXPECT_EQ(mine["invoices"][0]["kind"], "credit_note");
  json credited_inv = Get("/v1/invoices/" + number, carl);
  EXPECT_EQ(credited_inv["credited"]["gross"], inv["gross"]);
  EXPECT_EQ(credited_inv["credited"]["credit_notes"], 2);
  auto pdf = client_->Call("GET", "/v1/invoices/" + note["number"].get<std::string>() + ".pdf",
                           nullptr, T(carl));
  EXPECT_EQ(pdf.status, 200);
  ExpectInvariants();
}

// Term rentals: each paid term (order, renewal) has its tax invoice at the buyer's rate of the
// moment it was paid, with this request's country evidence; a country changed mid-term taxes the
// next renewal at the new rate; the refund of a paid term that never started is a credit note
// against that term's invoice; every number appears once, in its series.
TEST_P(BillingApiTest, EachPaidTermHasItsInvoiceAtTheRateOfItsPaymentAndARefundItsCreditNote) {
  auto node = client_->Call("POST", "/v1/admin/nodes", {{"gpu", "H100 SXM"}, {"region", "DFW-1"}},
                            admin_);
  ASSERT_EQ(node.status, 201) << node.body;
  std::string carl = Customer("carl", "DE", "3000");
  std::string dora = Customer("dora", "FR");
  json order = {{"gpu", "H100 SXM"}, {"count", 1}, {"term", "week"}};
  auto quote = client_->Call("POST", "/v1/rentals/quote", order, T(carl));
  order["auto_renew"] = false;
  ASSERT_EQ(quote.status, 200) << quote.body;
  const long long net = Micros(quote.Json()["amount"]["net"]);
  const long long de_tax = net * 19 / 100;  // whole cents: exact
  ASSERT_EQ(quote.Json()["amount"]["tax"][0]["name"], "VAT DE 19%");
  EXPECT_EQ(Micros(quote.Json()["amount"]["tax_total"]), de_tax);
  auto made = client_->Send("POST", "/v1/rentals", order.dump(),
                            {{"Authorization", "Bearer " + T(carl)},
                             {"Content-Type", "application/json"},
                             {"CF-IPCountry", "de"}});
  ASSERT_EQ(made.status, 201) << made.body;
  json rental = made.Json();
  std::string id = std::to_string(rental["id"].get<long long>());
  ASSERT_TRUE(rental["invoice"].is_object()) << made.body;
  std::string first = rental["invoice"]["number"];
  json inv = Get("/v1/invoices/" + first, carl);
  EXPECT_EQ(inv["kind"], "invoice");
  EXPECT_EQ(Micros(inv["net"]), net);
  EXPECT_EQ(Micros(inv["tax"]), de_tax);
  EXPECT_EQ(Micros(inv["gross"]), net + de_tax);
  EXPECT_EQ(inv["tax_by_rate"][0]["label"], "VAT 19% (DE)");
  EXPECT_EQ(inv["evidence"]["billing_country"], "DE");
  EXPECT_EQ(inv["evidence"]["ip_country"], "DE");  // this request's, not an older one
  EXPECT_EQ(inv["supply_from"], rental["term_start"]);
  EXPECT_EQ(inv["supply_until"], rental["term_end"]);
  ASSERT_EQ(inv["lines"].size(), 1u);
  EXPECT_NE(inv["lines"][0]["description"].get<std::string>().find("1 x H100 SXM in DFW-1, week term 1"),
            std::string::npos)
      << inv.dump();
  EXPECT_EQ(Micros(Get("/v1/wallets", carl)["wallets"][0]["available"]), 3000'000'000 - net - de_tax);
  for (std::string suffix : {"", ".pdf", ".html"}) {
    EXPECT_EQ(client_->Call("GET", "/v1/invoices/" + first + suffix, nullptr, T(dora)).status, 404);
  }
  if (documents::HavePdfToText()) {
    auto pdf = client_->Call("GET", "/v1/invoices/" + first + ".pdf", nullptr, T(carl));
    ASSERT_EQ(pdf.status, 200);
    std::string text = documents::PdfToText(pdf.body);
    for (const std::string& s : {"Invoice " + first, "Term rental " + id,
                                 Printed(inv["net"]) + " USD", Printed(inv["tax"]) + " USD",
                                 Printed(inv["gross"]) + " USD"}) {
      EXPECT_NE(text.find(s), std::string::npos) << s << "\n" << text;
    }
  }

  // Mid-term the buyer moves to France (20%): the renewal is taxed at the rate of its payment.
  Advance(6 * 24 * 3600);
  ASSERT_EQ(client_->Call("PUT", "/v1/billing-profile", {{"billing_country", "FR"}}, T(carl)).status,
            200);
  auto renewed = client_->Call("POST", "/v1/rentals/" + id + "/renew", json::object(), T(carl));
  ASSERT_EQ(renewed.status, 200) << renewed.body;
  std::string second = renewed.Json()["invoice"]["number"];
  EXPECT_NE(second, first);
  json inv2 = Get("/v1/invoices/" + second, carl);
  EXPECT_EQ(Micros(inv2["tax"]), net * 20 / 100);
  EXPECT_EQ(inv2["buyer"]["country"], "FR");
  EXPECT_EQ(inv2["tax_by_rate"][0]["label"], "VAT 20% (FR)");
  EXPECT_NE(inv2["lines"][0]["description"].get<std::string>().find("week term 2"), std::string::npos);
  // Paying again answers the same invoice and charges nothing.
  auto again = client_->Call("POST", "/v1/rentals/" + id + "/renew", json::object(), T(carl));
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.Json()["invoice"]["number"], second);

  // Released before term 2 starts: term 2 is refunded, with a credit note against its invoice.
  auto released = client_->Call("POST", "/v1/rentals/" + id + "/release", {{"confirm", true}},
                                T(carl));
  ASSERT_EQ(released.status, 200) << released.body;
  EXPECT_EQ(Micros(Get("/v1/wallets", carl)["wallets"][0]["available"]), 3000'000'000 - net - de_tax);
  json mine = Get("/v1/invoices", carl);
  ASSERT_EQ(mine["invoices"].size(), 3u) << mine.dump();
  json note = mine["invoices"][0];
  EXPECT_EQ(note["kind"], "credit_note");
  EXPECT_EQ(note["number"].get<std::string>().rfind("CN-", 0), 0u);
  json full_note = Get("/v1/invoices/" + note["number"].get<std::string>(), carl);
  EXPECT_EQ(full_note["corrects"], second);
  EXPECT_EQ(full_note["gross"], inv2["gross"]);
  EXPECT_EQ(Get("/v1/invoices/" + second, carl)["credited"]["gross"], inv2["gross"]);
  // The rental's charges name their documents.
  json detail = Get("/v1/rentals/" + id, carl);
  ASSERT_EQ(detail["charges"].size(), 3u) << detail.dump();
  EXPECT_EQ(detail["charges"][0]["invoice"]["number"], first);
  EXPECT_EQ(detail["charges"][1]["invoice"]["number"], second);
  EXPECT_EQ(detail["charges"][2]["invoice"]["number"], note["number"]);
  // The two invoices are consecutive in their series (nothing else was issued in between).
  auto sequence = [](const std::string& n) { return std::stoll(n.substr(n.rfind('-') + 1)); };
  EXPECT_EQ(sequence(second), sequence(first) + 1);
  // The tax report of the period: DE keeps its 19%, FR's invoice and credit note cancel out.
  TimestampMicros issued = ParseTimestamp(inv["issued_at"].get<std::string>()).value();
  std::string period = "/v1/admin/tax-report?from=" + FormatTimestamp(issued - kMicrosPerDay) +
                       "&until=" + FormatTimestamp(issued + 30 * kMicrosPerDay);
  json report = Get(period, admin_);
  ASSERT_EQ(report["rows"].size(), 2u) << report.dump();
  EXPECT_EQ(report["rows"][0]["country"], "DE");
  EXPECT_EQ(report["rows"][0]["label"], "VAT 19% (DE)");
  EXPECT_EQ(Micros(report["rows"][0]["net"]), net);
  EXPECT_EQ(Micros(report["rows"][0]["tax"]), de_tax);
  EXPECT_EQ(report["rows"][1]["country"], "FR");
  EXPECT_EQ(report["rows"][1]["invoices"], 1);
  EXPECT_EQ(report["rows"][1]["credit_notes"], 1);
  EXPECT_EQ(report["rows"][1]["tax"], "0.000000");
  EXPECT_EQ(Micros(report["tax"]), de_tax);
  EXPECT_EQ(report["numbers"]["invoices"]["first"], first);
  EXPECT_EQ(report["numbers"]["invoices"]["last"], second);
  EXPECT_EQ(client_->Call("GET", period, nullptr, T(carl)).status, 403);
  struct Bad {
    std::string query;
    const char* field;
  } bad[] = {{"until=2026-12-01T00:00:00Z", "from"},
             {"from=2026-12-01T00:00:00Z", "until"},
             {"from=yesterday&until=2026-12-01T00:00:00Z", "from"},
             {"from=2026-12-01T00:00:00Z&until=2026-12-01T00:00:00Z", "until"},
             {"from=2026-01-01T00:00:00Z&until=2027-01-03T00:00:00Z", "until"}};
  for (const auto& b : bad) {
    auto r = client_->Call("GET", "/v1/admin/tax-report?" + b.query, nullptr, admin_);
    EXPECT_EQ(r.status, 400) << b.query;
    EXPECT_EQ(r.Json()["error"]["field"], b.field) << b.query << " " << r.body;
  }

  Restart();
  EXPECT_EQ(Get("/v1/invoices/" + second, carl)["gross"], inv2["gross"]);
  ExpectInvariants();
  EXPECT_EQ(Get("/v1/admin/rentals", admin_)["settlement"], "ok");
}

// Issue 25 through the API: a week of an RTX 3090 in Germany, renewed, 1 TB of extra NVMe added a
// day in, released. Two refunds (the renewal, 77.35, and the next week's NVMe, 2.499), two credit
// notes, each against the invoice of the charge it refunds; the admin checks say ok and match every
// charge.
TEST_P(BillingApiTest, ARenewedRentalWithExtraNvmeReleasedGetsACreditNotePerRefund) {
  auto node =
      client_->Call("POST", "/v1/admin/nodes", {{"gpu", "RTX 3090"}, {"region", "DFW-1"}}, admin_);
  ASSERT_EQ(node.status, 201) << node.body;
  std::string berta = Customer("berta", "DE", "500");
  auto made = client_->Call(
      "POST", "/v1/rentals",
      {{"gpu", "RTX 3090"}, {"count", 1}, {"term", "week"}, {"auto_renew", false}}, T(berta));
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = std::to_string(made.Json()["id"].get<long long>());
  auto renewed = client_->Call("POST", "/v1/rentals/" + id + "/renew", json::object(), T(berta));
  ASSERT_EQ(renewed.status, 200) << renewed.body;
  Advance(24 * 3600);
  auto nvme = client_->Call("POST", "/v1/rentals/" + id + "/extra-nvme", {{"add_tb", 1}}, T(berta));
  ASSERT_EQ(nvme.status, 200) << nvme.body;
  auto released =
      client_->Call("POST", "/v1/rentals/" + id + "/release", {{"confirm", true}}, T(berta));
  ASSERT_EQ(released.status, 200) << released.body;

  json detail = Get("/v1/rentals/" + id, berta);
  ASSERT_EQ(detail["charges"].size(), 6u) << detail.dump();
  std::map<long long, json> by_id;
  for (const auto& c : detail["charges"]) by_id[c["id"].get<long long>()] = c;
  int notes = 0;
  for (const auto& c : detail["charges"]) {
    if (c["kind"] != "refund") continue;
    ++notes;
    const json& paid = by_id.at(c["refund_of"].get<long long>());
    json note = Get("/v1/invoices/" + c["invoice"]["number"].get<std::string>(), berta);
    json invoice = Get("/v1/invoices/" + paid["invoice"]["number"].get<std::string>(), berta);
    EXPECT_EQ(note["kind"], "credit_note");
    EXPECT_EQ(note["corrects"], invoice["number"]) << note.dump();
    for (const char* amount : {"net", "tax", "gross"}) {
      EXPECT_EQ(note[amount], invoice[amount]) << amount;
    }
    if (paid["kind"] == "renewal") {
      EXPECT_EQ(Micros(note["net"]), 65'000'000);
      EXPECT_EQ(Micros(note["tax"]), 12'350'000);
      EXPECT_EQ(Micros(note["gross"]), 77'350'000);
    } else {
      EXPECT_EQ(paid["kind"], "extra_nvme");
      EXPECT_EQ(Micros(note["net"]), 2'100'000);
      EXPECT_EQ(Micros(note["tax"]), 399'000);
      EXPECT_EQ(Micros(note["gross"]), 2'499'000);
    }
  }
  EXPECT_EQ(notes, 2);
  json billing = Get("/v1/admin/billing", admin_);
  EXPECT_EQ(billing["invariants"], "ok") << billing.dump();
  EXPECT_EQ(billing["credit_notes"], 2);
  EXPECT_EQ(billing["rental_charges_matched"], 6);
  json invariants = Get("/v1/admin/invariants", admin_);
  EXPECT_EQ(invariants["ok"], true) << invariants.dump();
  std::vector<std::string> names;
  for (const auto& c : invariants["checks"]) names.push_back(c["name"]);
  for (const char* name : {"billing.memory", "billing.documents", "billing.charge_documents"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << invariants.dump();
  }
  Restart();
  ExpectInvariants();
}

INSTANTIATE_TEST_SUITE_P(Backends, BillingApiTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gpuhub::testing
