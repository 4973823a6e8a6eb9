// Tax documents as people read them: a printable HTML page and a PDF (libharu), both printed
// from documents::View, so they hold the same text and the same numbers as each other and as
// the JSON of the API.
//
// Thread-safety: every function is reentrant (each call makes its own libharu document).
#pragma once

#include <string>

#include "billing/document.h"
#include "core/status.h"

namespace gpuhub::documents {

// Debian's fonts-dejavu-core: a Unicode TrueType font, so that names and addresses in any script
// (German umlauts, Cyrillic, ...) print as written.
inline constexpr const char* kDefaultPdfFont = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

struct PdfOptions {
  // The TrueType font embedded in the PDF. When it cannot be read the PDF falls back to the
  // standard Helvetica (no embedding), printing characters outside Windows-1252 as '?'.
  std::string font_path = kDefaultPdfFont;
};

// A standalone HTML page (inline CSS for screen and print, no script, every value escaped).
std::string RenderHtml(const billing::Document& doc);

// The PDF bytes. internal when libharu fails (out of memory, a broken font file).
Result<std::string> RenderPdf(const billing::Document& doc, const PdfOptions& options = {});

}  // namespace gpuhub::documents
