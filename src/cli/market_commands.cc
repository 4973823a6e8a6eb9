// The CLI side of the spot exchange: fit on live prices (see market_fit.h).
#include <iostream>

#include "cli/command_registry.h"
#include "cli/market_fit.h"
#include "fit/market_fit.h"
#include "cli/server_client.h"

namespace gpuhub::cli {

Result<std::vector<fit::MarketOffer>> FetchOffers(const std::string& server) {
  ServerCall call;
  call.path = "/v1/offers";
  GPUHUB_ASSIGN_OR_RETURN(net::Response answer, CallServer(server, call));
  if (answer.status != 200) return Status::Internal(ServerError(call, answer));
  auto offers = fit::ParseOffersJson(answer.body);
  if (!offers.ok()) {
    return Status::Internal(offers.status().message() + " (is " + server + " a gpuhub server?)");
  }
  return offers;
}

void RunMarketFit(const fit::RequestFields& fields, const fit::RequestContext& context,
                  const catalog::Catalog& fleet, const std::string& server, bool json) {
  auto request = fit::ResolveMarketFitRequest(fields, context, fleet);
  if (!request.ok()) {
    return request.status().code() == StatusCode::kInvalidArgument ||
                   request.status().code() == StatusCode::kNotFound
               ? FailBadInput(request.status().message())
               : Fail(request.status().message());
  }
  if (server.empty()) {
    return FailBadInput(
        "--prices market needs --server URL (a running gpuhub serve), or "
        "GPUHUB_SERVER in the environment");
  }
  auto offers = FetchOffers(server);
  if (!offers.ok()) {
    return offers.status().code() == StatusCode::kInvalidArgument
               ? FailBadInput(offers.status().message())
               : Fail(offers.status().message());
  }
  auto result = fit::FitMarket(fleet, *request, *offers);
  if (!result.ok()) return FailBadInput(result.status().message());
  if (json) {
    std::cout << fit::MarketFitReportJson(*request, *result) << "\n";
  } else {
    std::cout << fit::MarketFitReportText(*request, *result);
  }
  SetExitCode(kExitOk);
}

}  // namespace gpuhub::cli
