// `gpuhub fit --prices market --server URL` (market_commands.cc): the same fit request as list
// prices, ranked on the live offers of a running server's spot exchange (GET /v1/offers).
#pragma once

#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "core/status.h"
#include "fit/market_fit.h"
#include "fit/request.h"

namespace gpuhub::cli {

// Prints the report (text, or JSON with `json`) and sets the exit code: 2 for bad input, 1 when
// the server cannot be reached or answers with an error.
void RunMarketFit(const fit::RequestFields& fields, const fit::RequestContext& context,
                  const catalog::Catalog& fleet, const std::string& server, bool json);

// The live offers of a running server's spot exchange (GET /v1/offers). invalid_argument for a bad
// --server; unavailable or internal (with the server's answer) otherwise.
Result<std::vector<fit::MarketOffer>> FetchOffers(const std::string& server);

}  // namespace gpuhub::cli
