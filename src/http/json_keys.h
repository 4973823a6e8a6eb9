// Repeated member names in a JSON request body. RFC 8259 leaves their meaning open (nlohmann keeps
// the last, another parser the first), so a body that names a field twice is refused rather than
// read one way by the server and another way by whatever checked it on the way (a proxy, a WAF,
// the customer's own tooling).
#pragma once

#include <string_view>

#include "core/status.h"

namespace gpuhub::http {

// invalid_argument naming the first repeated name (its field, at any depth, after unescaping:
// "a" and "\u0061" are one name); Ok for a text without one, and also for a text that is not valid
// JSON (the caller's parse reports that). Linear in the text: each object's names are kept in a
// hash set once it has more than a few.
Status CheckNoDuplicateKeys(std::string_view text);

}  // namespace gpuhub::http
