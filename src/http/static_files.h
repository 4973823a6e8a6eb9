// Static files from the web/ folder: GET/HEAD only, no directory traversal (".." segments and
// anything resolving outside the folder are refused), content types by extension, ETag +
// If-None-Match (304), Cache-Control "no-cache" for HTML (always revalidated, so a deploy shows
// at once) and one hour for assets.
#pragma once

#include <string>

#include "http/router.h"

namespace gpuhub::http {

Response ServeStaticFile(const std::string& web_dir, const Request& request);
// "text/html; charset=utf-8" for "index.html"; application/octet-stream when unknown.
std::string ContentTypeFor(const std::string& path);

}  // namespace gpuhub::http
