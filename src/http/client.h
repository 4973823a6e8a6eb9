// A small blocking HTTP/1.1 client for the CLI (`gpuhub fit --prices market --server URL`), so that
// Boost.Beast stays inside src/http. Plain http:// only; every call has a timeout.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuhub::http {

struct ClientResponse {
  int status = 0;
  std::string body;
};

// GET `path` ("/v1/offers") from `base_url` ("http://127.0.0.1:8080", no path). Errors:
// invalid_argument for a URL that is not http://HOST[:PORT]; unavailable when the server cannot be
// reached or does not answer within `timeout_seconds`, or answers with a body over 16 MiB.
Result<ClientResponse> HttpGet(std::string_view base_url, std::string_view path,
                               int timeout_seconds = 10);

}  // namespace gpuhub::http
