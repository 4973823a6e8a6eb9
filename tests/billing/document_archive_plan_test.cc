// The tax documents' reads from the store use their indexes, on SQLite and PostgreSQL (migration
// 17; engine/document_archive.h): a document by number and by source, an account's list page, an
// invoice's credit notes, a tax report's period and a chunk of documents and lines by id. The
// database's own plan is read (SQLite EXPLAIN QUERY PLAN, PostgreSQL EXPLAIN) on tables filled
// like real ones (20,000 documents of 200 accounts, two lines each, a credit note every 50th) and
// analyzed; no planner setting is changed. The archive's answers are checked on the same data.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/document_archive.h"
#include "store/store.h"
#include "store/test_databases.h"
#include "store/test_plans.h"

namespace gpuhub::engine {
namespace {

constexpr int kUsers = 200;
constexpr int kDocuments = 20'000;
constexpr int kCreditNoteEvery = 50;
constexpr TimestampMicros kHour = 3'600'000'000;
constexpr TimestampMicros kStart = 1'798'761'600'000'000;  // 2027-01-01

std::string Number(int id) {
  std::string n = std::to_string(id);
  return (id % kCreditNoteEvery == 0 ? "CN-2027-" : "2027-") + std::string(6 - n.size(), '0') + n;
}

class DocumentArchivePlanTest : public store::FreshDatabaseTest {
 protected:
  void SetUp() override {
    store::FreshDatabaseTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store::WriteBatch batch;
    store::AddPlanTestUsers(batch, kUsers, "customer");
    ASSERT_TRUE(store_->Apply(batch).ok());
    batch.Clear();
    for (int id = 1; id <= kDocuments; ++id) {
      billing::Document d;
      d.id = id;
      const bool note = id % kCreditNoteEvery == 0;
      d.kind = note ? billing::DocumentKind::kCreditNote : billing::DocumentKind::kInvoice;
      d.number = Number(id);
      d.year = 2027;
      d.sequence = id;
      // A credit note is its invoice's user's, correcting the document just before it.
      d.user_id = 1 + (note ? id - 1 : id) % kUsers;
      d.source = "test:" + std::to_string(id);
      d.title = "Statement";
      d.issued_at = kStart + id * kHour;
      d.currency = Currency::kUsd;
      d.net_micros = 1'000'000;
      d.gross_micros = 1'000'000;
      if (note) d.corrects = Number(id - 1);
      for (int l = 0; l < 2; ++l) {
        billing::Line line;
        line.description = "line " + std::to_string(l);
        line.quantity = 1;
        line.unit = "hour";
        line.unit_net_micros = 500'000;
        line.net_micros = 500'000;
        line.gross_micros = 500'000;
        d.lines.push_back(line);
      }
      WriteDocumentRows(batch, d);
      if (id % 2'000 == 0) {
        ASSERT_TRUE(store_->Apply(batch).ok());
        batch.Clear();
      }
    }
    store::AnalyzeIfPostgres(GetParam(), url_);
  }

  void ExpectIndexed(const store::Select& select, const std::string& sqlite_index,
                     const std::string& postgres_index, int rows, bool partial = false) {
    EXPECT_EQ(store::ExpectPlanUsesIndex(GetParam(), url_, select,
                                         GetParam() == "sqlite" ? sqlite_index : postgres_index,
                                         true, partial),
              rows);
  }
};

TEST_P(DocumentArchivePlanTest, EachReadOfOldDocumentsWalksAnIndex) {
  ExpectIndexed(DocumentByNumberSelect(Number(12'345), kDocuments),
                "sqlite_autoindex_tax_documents_2", "tax_documents_number_key", 1);
  ExpectIndexed(DocumentBySourceSelect("test:12345", kDocuments),
                "sqlite_autoindex_tax_documents_3", "tax_documents_source_key", 1);
  ExpectIndexed(UserDocumentsSelect(7, kDocuments / 2, 20), "tax_documents_by_user_id",
                "tax_documents_by_user_id", 20);
  ExpectIndexed(CreditNotesOfSelect(Number(12'349), kDocuments), "tax_documents_credit_notes",
                "tax_documents_credit_notes", 1, /*partial=*/true);
  ExpectIndexed(DocumentsIssuedSelect(kStart + 1'500 * kHour, kStart + 1'600 * kHour, kDocuments),
                "tax_documents_by_issued", "tax_documents_by_issued", 1);
  ExpectIndexed(DocumentRangeSelect(1'001, 1'100), "sqlite_autoindex_tax_documents_1",
                "tax_documents_pkey", 100);
  ExpectIndexed(LineRangeSelect(1'001, 1'100), "sqlite_autoindex_tax_document_lines_1",
                "tax_document_lines_pkey", 200);
}

TEST_P(DocumentArchivePlanTest, TheArchiveAnswersFromTheStore) {
  DocumentArchive archive(*store_);
  const std::int64_t through = kDocuments - 100;  // the newest 100 would be in memory
  auto found = archive.ByNumber(Number(4'321), through);
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->source, "test:4321");
  EXPECT_EQ((*found)->lines.size(), 2u);
  EXPECT_EQ((*found)->lines[1].description, "line 1");
  // Beyond `through`: memory's, so the archive does not answer for it.
  auto newer = archive.BySource("test:" + std::to_string(kDocuments - 5), through);
  ASSERT_TRUE(newer.ok());
  EXPECT_FALSE(newer->has_value());
  // An account's pages, newest first, walked to the end: every document of the account once.
  std::int64_t before = through + 1, seen = 0;
  for (;;) {
    auto page = archive.UserPage(7, before, 30);
    ASSERT_TRUE(page.ok());
    if (page->empty()) break;
    for (const auto& d : *page) {
      EXPECT_EQ(d.user_id, 7);
      EXPECT_LT(d.id, before);
      before = d.id;
      ++seen;
    }
  }
  std::int64_t expected = 0;
  for (int id = 1; id <= through; ++id) {
    const bool note = id % kCreditNoteEvery == 0;
    if (1 + (note ? id - 1 : id) % kUsers == 7) ++expected;
  }
  EXPECT_EQ(seen, expected);
  auto notes = archive.CreditNotesOf(Number(999), through);
  ASSERT_TRUE(notes.ok());
  ASSERT_EQ(notes->size(), 1u);
  EXPECT_EQ((*notes)[0].number, Number(1'000));
  // A period: documents issued in [hour 1,500, hour 4,000), each with its lines, in id order.
  std::int64_t count = 0, last = 0;
  ASSERT_TRUE(archive
                  .ScanIssued(kStart + 1'500 * kHour, kStart + 4'000 * kHour, through,
                              [&](const billing::Document& d) {
                                EXPECT_GT(d.id, last);
                                last = d.id;
                                EXPECT_EQ(d.lines.size(), 2u);
                                ++count;
                                return Status::Ok();
                              })
                  .ok());
  EXPECT_EQ(count, 2'500);
  std::int64_t all = 0;
  ASSERT_TRUE(archive
                  .ScanAll(through,
                           [&](const billing::Document&) {
                             ++all;
                             return Status::Ok();
                           })
                  .ok());
  EXPECT_EQ(all, through);
}

INSTANTIATE_TEST_SUITE_P(Databases, DocumentArchivePlanTest,
                         ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gpuhub::engine
