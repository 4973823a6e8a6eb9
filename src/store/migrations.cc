// The schema, as numbered migrations. Append new migrations at the end with the next number; never
// edit one that has shipped (databases in the field have already run it).
//
// Portable SQL only: both SQLite and PostgreSQL run these statements as written. Integers are
// BIGINT (money in micro-units, time in microseconds since the epoch), strings are TEXT.
#include "store/store.h"

namespace gpuhub::store {

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> migrations = {
      {1, "accounts",
       R"sql(
CREATE TABLE engine_meta (
  name TEXT PRIMARY KEY,
  value BIGINT NOT NULL
);
CREATE TABLE users (
  id BIGINT PRIMARY KEY,
  username TEXT NOT NULL UNIQUE,
  password_hash TEXT NOT NULL,
  roles TEXT NOT NULL,
  created_at_us BIGINT NOT NULL
);
CREATE TABLE sessions (
  token_hash TEXT PRIMARY KEY,
  user_id BIGINT NOT NULL REFERENCES users (id),
  created_at_us BIGINT NOT NULL,
  expires_at_us BIGINT NOT NULL
);
CREATE INDEX sessions_by_user ON sessions (user_id);
CREATE TABLE idempotency_keys (
  scope TEXT NOT NULL,
  idem_key TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  status_code BIGINT NOT NULL,
  response_body TEXT NOT NULL,
  created_at_us BIGINT NOT NULL,
  PRIMARY KEY (scope, idem_key)
);
)sql"},
      {2, "wallets",
       R"sql(
CREATE TABLE ledger_transfers (
  sequence BIGINT PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  debit_kind TEXT NOT NULL,
  debit_owner BIGINT NOT NULL,
  debit_currency TEXT NOT NULL,
  credit_kind TEXT NOT NULL,
  credit_owner BIGINT NOT NULL,
  credit_currency TEXT NOT NULL,
  amount_micros BIGINT NOT NULL,
  pending_id TEXT NOT NULL,
  code TEXT NOT NULL,
  memo TEXT NOT NULL,
  timestamp_us BIGINT NOT NULL,
  state TEXT NOT NULL
);
CREATE TABLE fx_rate_changes (
  version BIGINT PRIMARY KEY,
  base TEXT NOT NULL,
  quote TEXT NOT NULL,
  mid_rate_ppb BIGINT NOT NULL,
  spread_bps BIGINT NOT NULL,
  timestamp_us BIGINT NOT NULL
);
CREATE TABLE invoices (
  id TEXT PRIMARY KEY,
  user_id BIGINT NOT NULL REFERENCES users (id),
  currency TEXT NOT NULL,
  amount_micros BIGINT NOT NULL,
  status TEXT NOT NULL,
  created_at_us BIGINT NOT NULL,
  updated_at_us BIGINT NOT NULL,
  transfer_id TEXT NOT NULL
);
CREATE INDEX invoices_by_user ON invoices (user_id);
CREATE TABLE manual_credits (
  transfer_id TEXT PRIMARY KEY,
  admin_user_id BIGINT NOT NULL REFERENCES users (id),
  user_id BIGINT NOT NULL REFERENCES users (id),
  reason TEXT NOT NULL,
  created_at_us BIGINT NOT NULL
);
)sql"},
      {3, "market",
       R"sql(
CREATE TABLE market_machines (
  id BIGINT PRIMARY KEY,
  provider_id BIGINT NOT NULL REFERENCES users (id),
  gpu TEXT NOT NULL,
  gpus BIGINT NOT NULL,
  region TEXT NOT NULL,
  vcpus BIGINT NOT NULL,
  ram_gb BIGINT NOT NULL,
  disk_gb BIGINT NOT NULL,
  created_at_us BIGINT NOT NULL
);
CREATE INDEX market_machines_by_provider ON market_machines (provider_id);
CREATE TABLE market_asks (
  id BIGINT PRIMARY KEY,
  provider_id BIGINT NOT NULL REFERENCES users (id),
  machine_id BIGINT NOT NULL REFERENCES market_machines (id),
  gpu TEXT NOT NULL,
  price_micros BIGINT NOT NULL,
  min_gpus BIGINT NOT NULL,
  available_until_us BIGINT NOT NULL,
  status TEXT NOT NULL,
  created_at_us BIGINT NOT NULL,
  closed_at_us BIGINT NOT NULL
);
CREATE INDEX market_asks_by_machine ON market_asks (machine_id);
CREATE TABLE market_bids (
  id BIGINT PRIMARY KEY,
  customer_id BIGINT NOT NULL REFERENCES users (id),
  gpu TEXT NOT NULL,
  gpus BIGINT NOT NULL,
  region TEXT NOT NULL,
  is_market BIGINT NOT NULL,
  limit_micros BIGINT NOT NULL,
  time_in_force TEXT NOT NULL,
  expires_at_us BIGINT NOT NULL,
  currency TEXT NOT NULL,
  status TEXT NOT NULL,
  close_reason TEXT NOT NULL,
  created_at_us BIGINT NOT NULL,
  closed_at_us BIGINT NOT NULL,
  lease_id BIGINT NOT NULL,
  hold_micros BIGINT NOT NULL
);
CREATE INDEX market_bids_by_customer ON market_bids (customer_id);
CREATE TABLE market_leases (
  id BIGINT PRIMARY KEY,
  bid_id BIGINT NOT NULL,
  ask_id BIGINT NOT NULL,
  machine_id BIGINT NOT NULL REFERENCES market_machines (id),
  provider_id BIGINT NOT NULL REFERENCES users (id),
  customer_id BIGINT NOT NULL REFERENCES users (id),
  gpu TEXT NOT NULL,
  gpus BIGINT NOT NULL,
  gpu_mask BIGINT NOT NULL,
  price_micros BIGINT NOT NULL,
  fee_ppm BIGINT NOT NULL,
  currency TEXT NOT NULL,
  started_at_us BIGINT NOT NULL,
  window_until_us BIGINT NOT NULL,
  hours_paid BIGINT NOT NULL,
  status TEXT NOT NULL,
  ended_at_us BIGINT NOT NULL,
  end_reason TEXT NOT NULL
);
CREATE INDEX market_leases_by_customer ON market_leases (customer_id);
CREATE INDEX market_leases_by_provider ON market_leases (provider_id);
CREATE TABLE market_trades (
  id BIGINT PRIMARY KEY,
  gpu TEXT NOT NULL,
  price_micros BIGINT NOT NULL,
  gpus BIGINT NOT NULL,
  lease_id BIGINT NOT NULL,
  bid_id BIGINT NOT NULL,
  ask_id BIGINT NOT NULL,
  maker TEXT NOT NULL,
  created_at_us BIGINT NOT NULL
);
CREATE TABLE market_payouts (
  id BIGINT PRIMARY KEY,
  provider_id BIGINT NOT NULL REFERENCES users (id),
  amount_micros BIGINT NOT NULL,
  status TEXT NOT NULL,
  created_at_us BIGINT NOT NULL,
  updated_at_us BIGINT NOT NULL,
  admin_id BIGINT NOT NULL
);
CREATE INDEX market_payouts_by_provider ON market_payouts (provider_id);
)sql"},
      {4, "btcpay_payments",
       R"sql(
ALTER TABLE invoices ADD COLUMN processor TEXT NOT NULL DEFAULT 'demo';
ALTER TABLE invoices ADD COLUMN processor_invoice_id TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices ADD COLUMN checkout_url TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices ADD COLUMN additional_status TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices ADD COLUMN credited_micros BIGINT NOT NULL DEFAULT 0;
ALTER TABLE invoices ADD COLUMN held_micros BIGINT NOT NULL DEFAULT 0;
ALTER TABLE invoices ADD COLUMN expires_at_us BIGINT NOT NULL DEFAULT 0;
CREATE INDEX invoices_by_processor_id ON invoices (processor_invoice_id);
CREATE TABLE invoice_payments (
  invoice_id TEXT NOT NULL REFERENCES invoices (id),
  payment_id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  payment_method TEXT NOT NULL,
  fiat_micros BIGINT NOT NULL,
  state TEXT NOT NULL,
  transfer_id TEXT NOT NULL,
  source TEXT NOT NULL,
  created_at_us BIGINT NOT NULL,
  updated_at_us BIGINT NOT NULL,
  decided_by BIGINT NOT NULL,
  decision_reason TEXT NOT NULL,
  PRIMARY KEY (invoice_id, payment_id)
);
)sql"},
  };
  return migrations;
}

}  // namespace gpuhub::store
