// What a lease or a rental runs (agents.h): the image (curated or any reference), its extra
// container ports and its sealed registry credential, recorded with the order, kept in memory
// while the bid rests or the rental lives, and the image of a closed lease read back on demand.
#include <algorithm>

#include "core/strings.h"
#include "engine/agents.h"
#include "engine/agents_internal.h"
#include "engine/limits.h"
#include "engine/market.h"

namespace gpuhub::engine {

using agents_internal::PortsText;

namespace {
AgentsState& A(Txn& txn) { return *txn.state.agents; }
}  // namespace

namespace agents_internal {

std::string PortsText(const std::vector<int>& ports) {
  std::string out;
  for (int p : ports) out += (out.empty() ? "" : ",") + std::to_string(p);
  return out;
}
std::vector<int> PortsFromText(const std::string& text) {
  std::vector<int> out;
  for (const auto& p : Split(text, ',')) {
    if (auto n = ParseInt64(p, "port"); n.ok() && *n > 0 && *n < 65536) {
      out.push_back(static_cast<int>(*n));
    }
  }
  return out;
}

}  // namespace agents_internal

namespace {

// The image a lease or rental runs ("" = the default), checked with its extras.
Result<std::string> ChosenLaunchImage(Txn& txn, const std::string& image,
                                      const LaunchExtras& extras) {
  std::string chosen = image.empty() ? A(txn).config.default_image : image;
  GPUHUB_RETURN_IF_ERROR(ValidateImageRef(chosen));
  GPUHUB_RETURN_IF_ERROR(ValidateContainerPorts(extras.ports));
  if (extras.sealed_registry_auth.size() > kMaxSealedRegistryAuthBytes) {
    return Status::InvalidArgument("registry_auth is too long").WithField("registry_auth");
  }
  return chosen;
}
}  // namespace

Status RecordLaunchSpec(Txn& txn, market::OrderId bid_id, const std::string& image,
                        const LaunchExtras& extras) {
  GPUHUB_ASSIGN_OR_RETURN(const std::string chosen, ChosenLaunchImage(txn, image, extras));
  A(txn).image_by_bid[bid_id] = chosen;
  if (!extras.ports.empty() || !extras.sealed_registry_auth.empty()) {
    A(txn).extras_by_bid[bid_id] = extras;
  }
  txn.writes.Upsert("launch_specs", {{"bid_id", bid_id},
                                     {"image", chosen},
                                     {"created_at_us", txn.now},
                                     {"ports", PortsText(extras.ports)},
                                     {"registry_auth", extras.sealed_registry_auth}});
  return Status::Ok();
}

Status RecordRentalLaunchSpec(Txn& txn, std::int64_t rental_id, const std::string& image,
                              const LaunchExtras& extras) {
  GPUHUB_ASSIGN_OR_RETURN(const std::string chosen, ChosenLaunchImage(txn, image, extras));
  A(txn).launch_by_rental[rental_id] = {chosen, extras};
  txn.writes.Upsert("rental_launch_specs", {{"rental_id", rental_id},
                                            {"image", chosen},
                                            {"ports", PortsText(extras.ports)},
                                            {"registry_auth", extras.sealed_registry_auth},
                                            {"created_at_us", txn.now}});
  return Status::Ok();
}

const RentalLaunch* FindRentalLaunch(const State& state, std::int64_t rental_id) {
  auto it = state.agents->launch_by_rental.find(rental_id);
  return it == state.agents->launch_by_rental.end() ? nullptr : &it->second;
}

const LaunchExtras* BidExtras(const State& state, market::OrderId bid_id) {
  auto it = state.agents->extras_by_bid.find(bid_id);
  return it == state.agents->extras_by_bid.end() ? nullptr : &it->second;
}


std::string BidImage(const State& state, market::OrderId bid_id, const StoredImages* stored) {
  auto it = state.agents->image_by_bid.find(bid_id);
  if (it != state.agents->image_by_bid.end()) return it->second;
  if (stored != nullptr) {
    if (auto s = stored->find(bid_id); s != stored->end()) return s->second;
  }
  return state.agents->config.default_image;
}

std::string LeaseImage(const State& state, const market::Lease& lease,
                       const StoredImages* stored) {
  return BidImage(state, lease.bid_id, stored);
}

store::Select LaunchSpecSelect(market::OrderId bid_id) {
  return {"launch_specs", {"bid_id", "image"}, {{"bid_id", store::Condition::Op::kEq, bid_id}},
          {}, "", 1};
}

void ForgetClosedLaunchSpecs(State& state) {
  auto& images = state.agents->image_by_bid;
  const market::Exchange& x = state.market->exchange;
  // Most ticks: every spec's bid still rests (a filled or cancelled one is the exception).
  bool any_closed = false;
  for (const auto& [bid, image] : images) {
    if (x.FindBid(bid) == nullptr) {
      any_closed = true;
      break;
    }
  }
  if (!any_closed) return;
  const std::vector<market::OrderId> open = x.OpenBidIds();
  for (auto it = images.begin(); it != images.end();) {
    if (std::binary_search(open.begin(), open.end(), it->first)) {
      ++it;
    } else {
      state.agents->extras_by_bid.erase(it->first);
      it = images.erase(it);
    }
  }
}

}  // namespace gpuhub::engine
