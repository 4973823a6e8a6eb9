#include "documents/render.h"
#include "documents/view.h"

namespace gpuhub::documents {
namespace {

std::string Escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Lines(const std::vector<std::string>& lines) {
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    out += (i == 0 ? "<strong>" : "") + Escape(lines[i]) + (i == 0 ? "</strong>" : "") + "<br>";
  }
  return out;
}

constexpr const char* kStyle = R"css(
body{font-family:"DejaVu Sans",Helvetica,Arial,sans-serif;color:#111;margin:2rem auto;max-width:60rem;padding:0 1rem;font-size:14px}
h1{font-size:1.6rem;margin:0 0 .2rem}h2{font-size:1rem;font-weight:normal;margin:0 0 1.5rem;color:#444}
.parties{display:flex;gap:2rem;margin:1rem 0}.parties div{flex:1}.parties h3{font-size:.8rem;text-transform:uppercase;color:#666;margin:0 0 .3rem}
table{border-collapse:collapse;width:100%;margin:1rem 0}th,td{border-bottom:1px solid #ccc;padding:.35rem .4rem;text-align:left;vertical-align:top}
td.n,th.n{text-align:right;white-space:nowrap}dl{display:grid;grid-template-columns:max-content auto;gap:.2rem 1rem;margin:0}dt{color:#555}dd{margin:0}
.totals{margin-left:auto;width:auto}.totals td{border:none}.totals tr.gross td{font-weight:bold;border-top:2px solid #111}
.notes p{margin:.3rem 0}.evidence{color:#666;font-size:.8rem}.print{margin:1rem 0}
.site{display:flex;flex-wrap:wrap;gap:.25rem 1rem;align-items:center;border-bottom:1px solid #ccc;padding:0 0 .6rem;margin:0 0 1.5rem}
.site a{color:#3730a3;text-decoration:none}.site a:hover{text-decoration:underline}.site .brand{font-weight:bold;color:#111;margin-right:auto}
@media print{.print,.site{display:none}body{margin:0;max-width:none}}
)css";

}  // namespace

std::string RenderHtml(const billing::Document& doc) {
  View v = MakeView(doc);
  std::string h;
  h += "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  h += "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">";
  // The site's icon (else the browser asks for /favicon.ico, which the server does not have).
  h += "<link rel=\"icon\" href=\"/assets/favicon.svg\" type=\"image/svg+xml\">";
  h += "<title>" + Escape(v.title) + "</title><style>" + kStyle + "</style></head><body>\n";
  // The site's navigation (not printed), so that the page is not a dead end in the browser.
  h += "<nav class=\"site\" aria-label=\"Main\"><a class=\"brand\" href=\"/\">gpuhub</a>"
       "<a href=\"/\">Catalog</a><a href=\"/calculator/\">Calculator</a><a href=\"/guide/\">Guide</a>"
       "<a href=\"/market/\">Market</a><a href=\"/instances/\">Instances</a>"
       "<a href=\"/account/#billing\">Invoices</a><a href=\"/account/\">Account</a></nav>\n<main>\n";
  h += "<h1 id=\"title\">" + Escape(v.title) + "</h1>\n<h2>" + Escape(v.heading) + "</h2>\n";
  h += "<dl id=\"facts\">";
  for (const auto& [k, val] : v.facts) h += "<dt>" + Escape(k) + "</dt><dd>" + Escape(val) + "</dd>";
  h += "</dl>\n<div class=\"parties\"><div id=\"seller\"><h3>Seller</h3>" + Lines(v.seller) +
       "</div><div id=\"buyer\"><h3>Buyer</h3>" + Lines(v.buyer) + "</div></div>\n";
  h += "<table id=\"lines\"><thead><tr><th>Description</th><th class=\"n\">Quantity</th>"
       "<th class=\"n\">Unit net</th><th class=\"n\">Net</th><th class=\"n\">Tax rate</th>"
       "<th class=\"n\">Tax</th><th class=\"n\">Gross</th></tr></thead><tbody>";
  for (const auto& l : v.lines) {
    h += "<tr><td>" + Escape(l.description) + "</td><td class=\"n\">" + Escape(l.quantity) +
         "</td><td class=\"n\">" + l.unit_net + "</td><td class=\"n\">" + l.net +
         "</td><td class=\"n\">" + Escape(l.tax_rate) + "</td><td class=\"n\">" + l.tax +
         "</td><td class=\"n\">" + l.gross + "</td></tr>";
  }
  h += "</tbody></table>\n<table class=\"totals\" id=\"totals\">";
  h += "<tr><td>Net</td><td class=\"n\">" + v.net + " " + v.currency + "</td></tr>";
  for (const auto& [label, tax] : v.tax_groups) {
    h += "<tr><td>" + Escape(label) + "</td><td class=\"n\">" + tax + " " + v.currency +
         "</td></tr>";
  }
  h += "<tr><td>Tax</td><td class=\"n\">" + v.tax + " " + v.currency + "</td></tr>";
  h += "<tr class=\"gross\"><td>Gross (" + v.currency + ")</td><td class=\"n\">" + v.gross + " " +
       v.currency + "</td></tr></table>\n<div class=\"notes\" id=\"notes\">";
  for (const auto& n : v.notes) h += "<p>" + Escape(n) + "</p>";
  h += "</div>\n<div class=\"evidence\">";
  for (const auto& e : v.evidence) h += "<p>" + Escape(e) + "</p>";
  h += "</div>\n<p class=\"print\"><a href=\"" + Escape(doc.number) +
       ".pdf\">Download the PDF</a> · use your browser's Print to print this page</p>\n";
  h += "</main></body></html>\n";
  return h;
}

}  // namespace gpuhub::documents
