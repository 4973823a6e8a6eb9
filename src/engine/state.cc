#include "engine/state.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <functional>

#include "engine/agents.h"
#include "engine/alerts.h"
#include "engine/api_keys.h"
#include "engine/audit_log.h"
#include "engine/billing.h"
#include "engine/market.h"
#include "engine/notifications.h"
#include "engine/payout_destinations.h"
#include "engine/quote_requests.h"
#include "engine/rentals.h"
#include "engine/ssh_keys.h"
#include "engine/storage.h"
#include "engine/topups.h"
#include "engine/totp.h"
#include "engine/wallets.h"

namespace gpuhub::engine {

DomainConfig::DomainConfig() : agents(std::make_unique<AgentsConfig>()) {}
DomainConfig::~DomainConfig() = default;
DomainConfig::DomainConfig(const DomainConfig& o)
    : market(o.market),
      rentals(o.rentals),
      seller(o.seller),
      agents(std::make_unique<AgentsConfig>(*o.agents)),
      storage(o.storage),
      ledger_transfers_in_memory(o.ledger_transfers_in_memory),
      tax_documents_in_memory(o.tax_documents_in_memory),
      tax_document_lines_in_memory(o.tax_document_lines_in_memory) {}
DomainConfig& DomainConfig::operator=(const DomainConfig& o) {
  market = o.market;
  rentals = o.rentals;
  seller = o.seller;
  agents = std::make_unique<AgentsConfig>(*o.agents);
  storage = o.storage;
  ledger_transfers_in_memory = o.ledger_transfers_in_memory;
  tax_documents_in_memory = o.tax_documents_in_memory;
  tax_document_lines_in_memory = o.tax_document_lines_in_memory;
  return *this;
}

State::State()
    : wallets(std::make_unique<WalletsState>()),
      topups(std::make_unique<TopupsState>()),
      market(std::make_unique<MarketState>(market::ExchangeConfig{})),
      rentals(std::make_unique<RentalsState>(rentals::FleetConfig{})),
      notifications(std::make_unique<NotificationsState>()),
      ssh_keys(std::make_unique<SshKeysState>()),
      api_keys(std::make_unique<ApiKeysState>()),
      audit(std::make_unique<AuditState>()),
      totp(std::make_unique<TotpState>()),
      payout_destinations(std::make_unique<PayoutDestinationsState>()),
      agents(std::make_unique<AgentsState>()),
      billing(std::make_unique<BillingState>()),
      storage(std::make_unique<StorageState>(rentals::StorageConfig{})),
      alerts(std::make_unique<AlertsState>()),
      quote_requests(std::make_unique<QuoteRequestsState>()) {
  BindSpotTax(*this);
  BindLeaseStart(*this);
}
State::~State() = default;

namespace {

// One domain's load, timed into the log (event=domain_loaded): which part of start-up grows with
// the history the database holds.
Status Timed(const char* domain, const std::function<Status()>& load) {
  const auto started = std::chrono::steady_clock::now();
  Status s = load();
  spdlog::info("event=domain_loaded domain={} ms={:.1f}", domain,
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                   .count());
  return s;
}

}  // namespace

Result<std::unique_ptr<State>> LoadState(store::Store& store, const DomainConfig& config) {
  auto state = std::make_unique<State>();
  GPUHUB_RETURN_IF_ERROR(store
                             .Scan("engine_meta", {"name", "value"}, "name",
                                   [&](const store::Row& row) -> Status {
                                     GPUHUB_ASSIGN_OR_RETURN(std::string name, row.Text(0));
                                     GPUHUB_ASSIGN_OR_RETURN(state->meta[name], row.Int(1));
                                     return Status::Ok();
                                   })
                             .WithContext("loading engine_meta"));
  GPUHUB_RETURN_IF_ERROR(LoadAccounts(store, state->accounts).WithContext("loading accounts"));
  GPUHUB_RETURN_IF_ERROR(
      LoadIdempotency(store, state->idempotency).WithContext("loading idempotency keys"));
  GPUHUB_RETURN_IF_ERROR(Timed("wallets", [&] {
    return LoadWallets(store, config, *state->wallets).WithContext("loading wallets");
  }));
  GPUHUB_RETURN_IF_ERROR(LoadTopups(store, *state->topups).WithContext("loading top-ups"));
  GPUHUB_RETURN_IF_ERROR(Timed("market", [&] {
    return LoadMarket(store, config.market, state->wallets->ledger, *state->market)
        .WithContext("loading the spot exchange");
  }));
  GPUHUB_RETURN_IF_ERROR(LoadRentals(store, config.rentals, state->wallets->ledger, *state->rentals)
                             .WithContext("loading term rentals"));
  GPUHUB_RETURN_IF_ERROR(
      LoadNotifications(store, *state->notifications).WithContext("loading notifications"));
  GPUHUB_RETURN_IF_ERROR(LoadSshKeys(store, *state->ssh_keys).WithContext("loading SSH keys"));
  GPUHUB_RETURN_IF_ERROR(LoadApiKeys(store, *state->api_keys).WithContext("loading API keys"));
  GPUHUB_RETURN_IF_ERROR(LoadAuditLog(store, *state->audit).WithContext("loading the audit log"));
  GPUHUB_RETURN_IF_ERROR(LoadTotp(store, *state->totp).WithContext("loading two-factor sign-in"));
  GPUHUB_RETURN_IF_ERROR(LoadPayoutDestinations(store, *state->payout_destinations)
                             .WithContext("loading payout destinations"));
  state->agents->config = *config.agents;
  GPUHUB_RETURN_IF_ERROR(LoadAgents(store, state->market->exchange.OpenBidIds(), *state->agents)
                             .WithContext("loading host agents"));
  billing::Party seller{config.seller.name, config.seller.address, config.seller.country,
                        config.seller.vat_id};
  GPUHUB_RETURN_IF_ERROR(Timed("billing", [&] {
    return LoadBilling(store, seller,
                       {config.tax_documents_in_memory, config.tax_document_lines_in_memory},
                       *state->billing)
        .WithContext("loading billing");
  }));
  BindSpotTax(*state);
  BindLeaseStart(*state);
  GPUHUB_RETURN_IF_ERROR(LoadStorage(store, config.storage, state->wallets->ledger,
                                     state->rentals->fleet, *state->storage)
                             .WithContext("loading storage"));
  GPUHUB_RETURN_IF_ERROR(
      LoadQuoteRequests(store, *state->quote_requests).WithContext("loading quote requests"));
  // After the exchange and the fleet: each alert is indexed against their state now.
  GPUHUB_RETURN_IF_ERROR(LoadAlerts(store, *state).WithContext("loading alerts"));
  return state;
}

}  // namespace gpuhub::engine
