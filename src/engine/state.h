// The engine's in-memory state: everything the platform knows, rebuilt from the store at start-up
// (LoadState) and changed only by commands on the writer thread.
//
// Each domain keeps its own part (accounts, idempotency, wallets, later market and rentals) and
// its own loader; LoadState calls them in order.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/clock.h"
#include "core/status.h"
#include "engine/limits.h"
#include "market/config.h"
#include "rentals/config.h"
#include "rentals/storage.h"
#include "store/store.h"

namespace gpuhub::engine {

// Roles are a bit set: one account may be customer and provider.
enum Role : std::uint32_t {
  kRoleCustomer = 1u << 0,
  kRoleProvider = 1u << 1,
  kRoleAdmin = 1u << 2,
};

struct User {
  std::int64_t id = 0;
  std::string username;       // canonical (lower case)
  std::string password_hash;  // Argon2id, crypto_pwhash_str format
  std::uint32_t roles = 0;
  TimestampMicros created_at = 0;

  bool Has(Role role) const { return (roles & role) != 0; }
};

struct Session {
  std::string token_hash;  // hex SHA-256 of the bearer token: the token itself is never stored
  std::int64_t user_id = 0;
  TimestampMicros created_at = 0;
  TimestampMicros expires_at = 0;
};

struct AccountsState {
  std::map<std::int64_t, User> users;
  std::unordered_map<std::string, std::int64_t> user_by_name;
  std::unordered_map<std::string, Session> sessions;  // by token hash
  // Sessions of a user by creation time (to drop the oldest beyond kMaxSessionsPerUser).
  std::map<std::int64_t, std::set<std::pair<TimestampMicros, std::string>>> sessions_by_user;
  // Every session by expiry time, so that the tick hook touches only the expired ones.
  std::set<std::pair<TimestampMicros, std::string>> sessions_by_expiry;
  std::int64_t next_user_id = 1;
};

struct IdempotencyRecord {
  std::string fingerprint;  // engine::Fingerprint::current of the first request (idempotency.h)
  int status_code = 0;
  std::string response_body;
  TimestampMicros created_at = 0;
};

struct IdempotencyState {
  std::map<std::pair<std::string, std::string>, IdempotencyRecord> records;  // (scope, key)
  std::multimap<TimestampMicros, std::pair<std::string, std::string>> by_age;
};

struct WalletsState;        // engine/wallets.h (the ledger, FX rates)
struct TopupsState;         // engine/topups.h (top-up invoices and their payments)
struct MarketState;         // engine/market.h (the spot exchange)
struct RentalsState;        // engine/rentals.h (term rentals)
struct NotificationsState;  // engine/notifications.h (notifications, webhooks, outbox)
struct SshKeysState;        // engine/ssh_keys.h (customers' SSH public keys)
struct ApiKeysState;        // engine/api_keys.h (scoped API keys)
struct AuditState;          // engine/audit_log.h (the audit log's next id; events stay in the store)
struct TotpState;           // engine/totp.h (two-factor sign-in)
struct PayoutDestinationsState;  // engine/payout_destinations.h (providers' payout addresses)
struct AgentsState;         // engine/agents.h (host agents, their reports and desired workloads)
struct AgentsConfig;
struct BillingState;        // engine/billing.h (profiles, tax rates, invoices)
struct AlertsState;         // engine/alerts.h (stock and price alerts)

// Who sells: printed as the seller on every tax document ([billing] seller_* in the config).
// Its country decides reverse charge (an EU business buying from another country).
struct SellerConfig {
  std::string name = "gpuhub";
  std::string address = "(address not configured: [billing] seller_address)";
  std::string country = "US";
  std::string vat_id;
};
struct StorageState;        // engine/storage.h (volumes, snapshots, egress)
struct QuoteRequestsState;  // engine/quote_requests.h (multi-node quote requests)

// How the domains are configured; fixed for the life of an engine (a reload keeps it).
struct DomainConfig {
  DomainConfig();
  ~DomainConfig();
  DomainConfig(const DomainConfig&);
  DomainConfig& operator=(const DomainConfig&);
  market::ExchangeConfig market;
  rentals::FleetConfig rentals;
  SellerConfig seller;
  std::unique_ptr<AgentsConfig> agents;  // never null
  rentals::StorageConfig storage;  // its regions: where storage is sold (the fleet's)
  // Newest ledger transfers kept in memory (kLedgerTransfersInMemory; tests use a small one).
  std::size_t ledger_transfers_in_memory = kLedgerTransfersInMemory;
  // Newest tax documents kept in memory, and their lines at most (kTaxDocumentsInMemory,
  // kTaxDocumentLinesInMemory; tests use small ones).
  std::size_t tax_documents_in_memory = kTaxDocumentsInMemory;
  std::size_t tax_document_lines_in_memory = kTaxDocumentLinesInMemory;
};

struct State {
  State();
  ~State();
  AccountsState accounts;
  IdempotencyState idempotency;
  std::unique_ptr<WalletsState> wallets;
  std::unique_ptr<TopupsState> topups;
  std::unique_ptr<MarketState> market;
  std::unique_ptr<RentalsState> rentals;
  std::unique_ptr<NotificationsState> notifications;
  std::unique_ptr<SshKeysState> ssh_keys;
  std::unique_ptr<ApiKeysState> api_keys;
  std::unique_ptr<AuditState> audit;
  std::unique_ptr<TotpState> totp;
  std::unique_ptr<PayoutDestinationsState> payout_destinations;
  std::unique_ptr<AgentsState> agents;
  std::unique_ptr<BillingState> billing;
  std::unique_ptr<StorageState> storage;
  std::unique_ptr<AlertsState> alerts;
  std::unique_ptr<QuoteRequestsState> quote_requests;
  // Engine-wide values that must survive a restart (the manual clock's time).
  std::map<std::string, std::int64_t> meta;
};

// Reads every table into a fresh State.
Result<std::unique_ptr<State>> LoadState(store::Store& store, const DomainConfig& config = {});

// Per-domain loaders (called by LoadState).
Status LoadAccounts(store::Store& store, AccountsState& state);
Status LoadIdempotency(store::Store& store, IdempotencyState& state);
Status LoadWallets(store::Store& store, const DomainConfig& config, WalletsState& state);
Status LoadTopups(store::Store& store, TopupsState& state);
// engine/ssh_keys.cc and engine/agents.cc.
Status LoadSshKeys(store::Store& store, SshKeysState& state);
Status LoadApiKeys(store::Store& store, ApiKeysState& state);
Status LoadAuditLog(store::Store& store, AuditState& state);
Status LoadTotp(store::Store& store, TotpState& state);
Status LoadPayoutDestinations(store::Store& store, PayoutDestinationsState& state);
Status LoadAgents(store::Store& store, AgentsState& state);
Status LoadQuoteRequests(store::Store& store, QuoteRequestsState& state);

}  // namespace gpuhub::engine
