// For tests only: the text of a PDF as `pdftotext -layout` (poppler-utils) reads it, so that a
// test can check what a reader of the document sees. Not linked into gpuhub itself.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace gpuhub::documents {

inline bool HavePdfToText() { return std::system("command -v pdftotext >/dev/null 2>&1") == 0; }

// "" when the file cannot be written or pdftotext fails.
inline std::string PdfToText(const std::string& pdf) {
  char path[] = "/tmp/gpuhub_pdf_XXXXXX";
  int fd = ::mkstemp(path);
  if (fd < 0) return "";
  bool written = ::write(fd, pdf.data(), pdf.size()) == static_cast<ssize_t>(pdf.size());
  ::close(fd);
  std::string text;
  if (written) {
    std::string cmd = std::string("pdftotext -q -layout ") + path + " - 2>/dev/null";
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[4096];
      std::size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
      ::pclose(p);
    }
  }
  ::unlink(path);
  return text;
}

}  // namespace gpuhub::documents
