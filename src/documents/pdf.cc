// The PDF of a tax document, drawn with libharu (Debian's libhpdf): A4, the font embedded, text
// wrapped and paged, every page footed with the document number and "page i of n".
#include <hpdf.h>

#include <memory>
#include <string>
#include <vector>

#include "documents/render.h"
#include "documents/view.h"

namespace gpuhub::documents {
namespace {

constexpr float kPageWidth = 595.276f;  // A4 in points
constexpr float kPageHeight = 841.89f;
constexpr float kLeft = 45;
constexpr float kRight = 550;
constexpr float kTop = 800;
constexpr float kBottom = 60;

struct Errors {
  HPDF_STATUS first = HPDF_OK;
  HPDF_STATUS detail = 0;
};

void OnError(HPDF_STATUS error, HPDF_STATUS detail, void* data) {
  auto* e = static_cast<Errors*>(data);
  if (e->first == HPDF_OK) {
    e->first = error;
    e->detail = detail;
  }
}

// UTF-8 to Windows-1252 for the Helvetica fallback: Latin-1 as is, the euro sign, '?' otherwise.
std::string ToCp1252(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    std::uint32_t cp = c;
    std::size_t len = 1;
    if (c >= 0xF0) {
      len = 4;
    } else if (c >= 0xE0) {
      cp = c & 0x0F;
      len = 3;
    } else if (c >= 0xC0) {
      cp = c & 0x1F;
      len = 2;
    }
    if (len > 1) {
      if (i + len > s.size()) break;
      if (len == 4) cp = 0x110000;
      for (std::size_t k = 1; k < len && cp < 0x110000; ++k) {
        cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      }
    }
    if (cp < 0x80 || (cp >= 0xA0 && cp <= 0xFF)) {
      out += static_cast<char>(cp);
    } else if (cp == 0x20AC) {
      out += static_cast<char>(0x80);
    } else {
      out += '?';
    }
    i += len;
  }
  return out;
}

class Writer {
 public:
  Writer(HPDF_Doc pdf, HPDF_Font font, bool utf8, std::string footer)
      : pdf_(pdf), font_(font), utf8_(utf8), footer_(std::move(footer)) {
    NewPage();
  }

  float y() const { return y_; }
  void Down(float points) { y_ -= points; }
  // Room for `points` more on this page, else a new page.
  void Need(float points) {
    if (y_ - points < kBottom) NewPage();
  }

  float Width(const std::string& text, float size) {
    HPDF_Page_SetFontAndSize(page_, font_, size);
    return HPDF_Page_TextWidth(page_, Enc(text).c_str());
  }
  void Text(float x, const std::string& text, float size) {
    HPDF_Page_BeginText(page_);
    HPDF_Page_SetFontAndSize(page_, font_, size);
    HPDF_Page_TextOut(page_, x, y_, Enc(text).c_str());
    HPDF_Page_EndText(page_);
  }
  void Right(float right, const std::string& text, float size) {
    Text(right - Width(text, size), text, size);
  }
  // Word-wrapped lines of at most `width` points.
  std::vector<std::string> Wrap(const std::string& text, float width, float size) {
    std::vector<std::string> lines;
    std::string line;
    std::size_t i = 0;
    while (i < text.size()) {
      std::size_t end = text.find(' ', i);
      if (end == std::string::npos) end = text.size();
      std::string word = text.substr(i, end - i);
      std::string candidate = line.empty() ? word : line + " " + word;
      if (!line.empty() && Width(candidate, size) > width) {
        lines.push_back(line);
        line = word;
      } else {
        line = candidate;
      }
      i = end + 1;
    }
    if (!line.empty() || lines.empty()) lines.push_back(line);
    return lines;
  }
  void Paragraph(const std::string& text, float size, float width = kRight - kLeft) {
    for (const auto& line : Wrap(text, width, size)) {
      Need(size + 3);
      Text(kLeft, line, size);
      Down(size + 3);
    }
  }
  void Rule(float width = 0.5f) {
    HPDF_Page_SetLineWidth(page_, width);
    HPDF_Page_MoveTo(page_, kLeft, y_);
    HPDF_Page_LineTo(page_, kRight, y_);
    HPDF_Page_Stroke(page_);
  }
  // "number - page i of n" at the foot of every page, once all pages exist.
  void Footers() {
    for (std::size_t i = 0; i < pages_.size(); ++i) {
      std::string text = footer_ + " - page " + std::to_string(i + 1) + " of " +
                         std::to_string(pages_.size());
      HPDF_Page_BeginText(pages_[i]);
      HPDF_Page_SetFontAndSize(pages_[i], font_, 8);
      HPDF_Page_TextOut(pages_[i], kLeft, 35, Enc(text).c_str());
      HPDF_Page_EndText(pages_[i]);
    }
  }

 private:
  std::string Enc(const std::string& text) { return utf8_ ? text : ToCp1252(text); }
  void NewPage() {
    page_ = HPDF_AddPage(pdf_);
    HPDF_Page_SetWidth(page_, kPageWidth);
    HPDF_Page_SetHeight(page_, kPageHeight);
    pages_.push_back(page_);
    y_ = kTop;
  }

  HPDF_Doc pdf_;
  HPDF_Font font_;
  bool utf8_;
  std::string footer_;
  HPDF_Page page_ = nullptr;
  std::vector<HPDF_Page> pages_;
  float y_ = kTop;
};

// Columns of the lines table: the description wraps, the figures are right-aligned at these.
constexpr float kDescriptionWidth = 182;
constexpr float kQuantityRight = 292;
constexpr float kUnitRight = 342;
constexpr float kNetRight = 392;
constexpr float kRateRight = 462;
constexpr float kTaxRight = 505;
constexpr float kGrossRight = kRight;

void Draw(Writer& w, const View& v) {
  w.Text(kLeft, v.title, 18);
  w.Down(20);
  w.Paragraph(v.heading, 11);
  w.Down(6);
  for (const auto& [label, value] : v.facts) {
    w.Text(kLeft, label + ":", 9);
    w.Text(kLeft + 110, value, 9);
    w.Down(12);
  }
  w.Down(8);
  // Seller and buyer side by side.
  w.Text(kLeft, "SELLER", 8);
  w.Text(300, "BUYER", 8);
  w.Down(12);
  std::size_t rows = std::max(v.seller.size(), v.buyer.size());
  for (std::size_t i = 0; i < rows; ++i) {
    w.Need(12);
    if (i < v.seller.size()) w.Text(kLeft, v.seller[i], 9);
    if (i < v.buyer.size()) w.Text(300, v.buyer[i], 9);
    w.Down(12);
  }
  w.Down(10);
  auto header = [&] {
    w.Need(30);
    w.Text(kLeft, "Description", 8);
    w.Right(kQuantityRight, "Quantity", 8);
    w.Right(kUnitRight, "Unit net", 8);
    w.Right(kNetRight, "Net", 8);
    w.Right(kRateRight, "Tax rate", 8);
    w.Right(kTaxRight, "Tax", 8);
    w.Right(kGrossRight, "Gross", 8);
    w.Down(4);
    w.Rule();
    w.Down(11);
  };
  header();
  for (const auto& l : v.lines) {
    std::vector<std::string> text = w.Wrap(l.description, kDescriptionWidth, 8);
    float height = static_cast<float>(text.size()) * 10 + 4;
    if (w.y() - height < kBottom) {
      w.Need(height + 40);
      header();
    }
    w.Right(kQuantityRight, l.quantity, 8);
    w.Right(kUnitRight, l.unit_net, 8);
    w.Right(kNetRight, l.net, 8);
    w.Right(kRateRight, l.tax_rate, 8);
    w.Right(kTaxRight, l.tax, 8);
    w.Right(kGrossRight, l.gross, 8);
    for (const auto& t : text) {
      w.Text(kLeft, t, 8);
      w.Down(10);
    }
    w.Down(4);
  }
  w.Rule();
  w.Down(16);
  // Totals, right-aligned: net, tax by rate, tax, gross.
  auto total = [&](const std::string& label, const std::string& amount, float size) {
    w.Need(size + 6);
    w.Right(kRight - 120, label, size);
    w.Right(kRight, amount + " " + v.currency, size);
    w.Down(size + 5);
  };
  total("Net", v.net, 9);
  for (const auto& [label, amount] : v.tax_groups) total(label, amount, 9);
  total("Tax", v.tax, 9);
  total("Gross", v.gross, 11);
  w.Down(12);
  for (const auto& n : v.notes) {
    w.Paragraph(n, 8);
    w.Down(3);
  }
  w.Down(6);
  for (const auto& e : v.evidence) w.Paragraph(e, 7);
}

}  // namespace

Result<std::string> RenderPdf(const billing::Document& doc, const PdfOptions& options) {
  Errors errors;
  std::unique_ptr<std::remove_pointer_t<HPDF_Doc>, void (*)(HPDF_Doc)> pdf(
      HPDF_New(OnError, &errors), HPDF_Free);
  if (!pdf) return Status::Internal("libharu could not start a document");
  HPDF_SetCompressionMode(pdf.get(), HPDF_COMP_ALL);
  View v = MakeView(doc);
  HPDF_SetInfoAttr(pdf.get(), HPDF_INFO_CREATOR, "gpuhub");
  HPDF_SetInfoAttr(pdf.get(), HPDF_INFO_TITLE, ToCp1252(v.title).c_str());

  HPDF_Font font = nullptr;
  bool utf8 = false;
  if (!options.font_path.empty()) {
    HPDF_UseUTFEncodings(pdf.get());
    const char* name = HPDF_LoadTTFontFromFile(pdf.get(), options.font_path.c_str(), HPDF_TRUE);
    if (name != nullptr && errors.first == HPDF_OK) {
      font = HPDF_GetFont(pdf.get(), name, "UTF-8");
      utf8 = font != nullptr;
    }
  }
  if (font == nullptr) {
    // No usable TrueType font: the standard Helvetica, whose text is Windows-1252.
    errors = {};
    HPDF_ResetError(pdf.get());
    font = HPDF_GetFont(pdf.get(), "Helvetica", "WinAnsiEncoding");
  }
  if (font == nullptr || errors.first != HPDF_OK) {
    return Status::Internal("libharu: no font (error " + std::to_string(errors.first) + ")");
  }
  Writer w(pdf.get(), font, utf8, v.title);
  Draw(w, v);
  w.Footers();
  if (HPDF_SaveToStream(pdf.get()) != HPDF_OK || errors.first != HPDF_OK) {
    return Status::Internal("libharu could not write the PDF (error " +
                            std::to_string(errors.first) + ", detail " +
                            std::to_string(errors.detail) + ")");
  }
  std::string out(HPDF_GetStreamSize(pdf.get()), '\0');
  HPDF_UINT32 size = static_cast<HPDF_UINT32>(out.size());
  if (HPDF_ReadFromStream(pdf.get(), reinterpret_cast<HPDF_BYTE*>(out.data()), &size) !=
          HPDF_OK &&
      errors.first != HPDF_STREAM_EOF) {
    return Status::Internal("libharu could not read the PDF back");
  }
  out.resize(size);
  return out;
}

}  // namespace gpuhub::documents
