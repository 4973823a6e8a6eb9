// Tax documents in the store: the engine keeps only the newest in memory (BillingState, a window
// of DomainOptions::tax_documents_in_memory) and reads older ones back from tax_documents and
// tax_document_lines when asked for: by number, by source, an account's list, an invoice's credit
// notes, a period's documents (tax reports) and all of them (the admin check), each through an
// index (migration 17; tests/market/document_archive_plan_test.cc reads the plans).
//
// Contract: the store is the engine's and must outlive the archive; every call reads only
// documents with id <= `through` (those that left memory: the caller merges its own newer ones)
// and is one or a few queries on the store, from the writer thread. Rows are read as the engine's
// WriteDocument wrote them. A store error is returned as is (unavailable).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "billing/document.h"
#include "store/read_pool.h"
#include "store/store.h"

namespace gpuhub::engine {

// The reads, public for the plan tests.
store::Select DocumentByNumberSelect(std::string_view number, std::int64_t through);
store::Select DocumentBySourceSelect(std::string_view source, std::int64_t through);
store::Select UserDocumentsSelect(std::int64_t user_id, std::int64_t before_id, std::size_t limit);
store::Select CreditNotesOfSelect(std::string_view invoice_number, std::int64_t through);
store::Select DocumentsIssuedSelect(TimestampMicros from, TimestampMicros until,
                                    std::int64_t through);
// Documents [first_id, last_id] and their lines, in id (and line) order.
store::Select DocumentRangeSelect(std::int64_t first_id, std::int64_t last_id);
store::Select LineRangeSelect(std::int64_t first_id, std::int64_t last_id);
// Start-up: the documents after `after_id` and their lines; every series' count and highest
// number (and lowest, which must be 1); the highest id.
store::Select DocumentsAfterSelect(std::int64_t after_id);
store::Select LinesAfterSelect(std::int64_t after_id);
store::Select LineCountsAfterSelect(std::int64_t after_id);  // (document_id, count), id order
store::Select SeriesSelect();
store::Select LastDocumentIdSelect();

// Queues the rows of a new document: tax_documents and a tax_document_lines row per line.
void WriteDocumentRows(store::WriteBatch& writes, const billing::Document& d);
// A document row (DocumentRangeSelect's columns) without its lines; a line row.
Result<billing::Document> DocumentFromRow(const store::Row& row);
Result<billing::Line> LineFromRow(const store::Row& row);  // columns 2.. of LineRangeSelect

class DocumentArchive {
 public:
  // The engine's store (from the writer thread), or a pool of reader connections (beside it: the
  // admin check's walk of the whole history).
  explicit DocumentArchive(store::Store& store);
  explicit DocumentArchive(store::ReadPool& pool);
  // Every read holds `store_mutex` (the engine's: its committer holds it for a commit on the same
  // store). Null: no lock.
  void SerializeWith(std::recursive_mutex* store_mutex) { store_mutex_ = store_mutex; }
  // The highest stored id (0: none).
  Result<std::int64_t> LastId() const;

  // With their lines.
  Result<std::optional<billing::Document>> ByNumber(std::string_view number,
                                                    std::int64_t through) const;
  Result<std::optional<billing::Document>> BySource(std::string_view source,
                                                    std::int64_t through) const;
  // An account's documents with id < before_id (<= through + 1 by the caller), newest first,
  // at most `limit`, without their lines (lists show totals).
  Result<std::vector<billing::Document>> UserPage(std::int64_t user_id, std::int64_t before_id,
                                                  std::size_t limit) const;
  // The credit notes of an invoice, without their lines (what they gave back is in their totals).
  Result<std::vector<billing::Document>> CreditNotesOf(std::string_view invoice_number,
                                                       std::int64_t through) const;
  // With their lines, in id order, kDocumentArchiveChunk documents at a time: the documents
  // issued in [from, until), or every document (the admin check).
  Status ScanIssued(TimestampMicros from, TimestampMicros until, std::int64_t through,
                    const std::function<Status(const billing::Document&)>& fn) const;
  Status ScanAll(std::int64_t through,
                 const std::function<Status(const billing::Document&)>& fn) const;

 private:
  std::unique_lock<std::recursive_mutex> LockStore() const {
    return store_mutex_ ? std::unique_lock<std::recursive_mutex>(*store_mutex_)
                        : std::unique_lock<std::recursive_mutex>();
  }
  Result<std::optional<billing::Document>> One(const store::Select& select) const;
  // Documents [first, last] that `keep` accepts, with their lines.
  Status ScanRange(std::int64_t first, std::int64_t last,
                   const std::function<bool(const billing::Document&)>& keep,
                   const std::function<Status(const billing::Document&)>& fn) const;

  std::function<Status(const store::Select&, const std::function<Status(const store::Row&)>&)>
      query_;
  std::recursive_mutex* store_mutex_ = nullptr;
};

}  // namespace gpuhub::engine
