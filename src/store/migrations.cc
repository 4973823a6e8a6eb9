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
      {5, "rentals",
       R"sql(
CREATE TABLE rental_nodes (
  id BIGINT PRIMARY KEY,
  gpu TEXT NOT NULL,
  region TEXT NOT NULL,
  cards BIGINT NOT NULL,
  hostname TEXT NOT NULL,
  nvme_included_gb_per_card BIGINT NOT NULL,
  nvme_extra_capacity_gb BIGINT NOT NULL,
  state TEXT NOT NULL,
  created_at_us BIGINT NOT NULL,
  updated_at_us BIGINT NOT NULL
);
CREATE TABLE rentals (
  id BIGINT PRIMARY KEY,
  customer_id BIGINT NOT NULL REFERENCES users (id),
  gpu TEXT NOT NULL,
  count BIGINT NOT NULL,
  region TEXT NOT NULL,
  node_id BIGINT NOT NULL REFERENCES rental_nodes (id),
  card_mask BIGINT NOT NULL,
  term TEXT NOT NULL,
  list_micros BIGINT NOT NULL,
  discount_ppm BIGINT NOT NULL,
  price_micros BIGINT NOT NULL,
  currency TEXT NOT NULL,
  auto_renew BIGINT NOT NULL,
  state TEXT NOT NULL,
  release_reason TEXT NOT NULL,
  period BIGINT NOT NULL,
  next_paid BIGINT NOT NULL,
  term_start_us BIGINT NOT NULL,
  term_end_us BIGINT NOT NULL,
  created_at_us BIGINT NOT NULL,
  updated_at_us BIGINT NOT NULL,
  released_at_us BIGINT NOT NULL,
  auto_renew_attempted_at_us BIGINT NOT NULL,
  auto_renew_failures BIGINT NOT NULL,
  renewal_invoiced_at_us BIGINT NOT NULL,
  extra_nvme_gb BIGINT NOT NULL,
  events BIGINT NOT NULL,
  instance_state TEXT NOT NULL,
  nvme_gb BIGINT NOT NULL,
  provisioning_deadline_us BIGINT NOT NULL,
  connection_json TEXT NOT NULL,
  instance_error TEXT NOT NULL,
  key_destroyed_at_us BIGINT NOT NULL,
  wipe_due_at_us BIGINT NOT NULL,
  wiped_at_us BIGINT NOT NULL
);
CREATE INDEX rentals_by_customer ON rentals (customer_id);
CREATE INDEX rentals_by_node ON rentals (node_id);
CREATE TABLE rental_renewals (
  rental_id BIGINT NOT NULL REFERENCES rentals (id),
  period BIGINT NOT NULL,
  customer_id BIGINT NOT NULL REFERENCES users (id),
  net_micros BIGINT NOT NULL,
  tax_micros BIGINT NOT NULL,
  gross_micros BIGINT NOT NULL,
  tax_lines_json TEXT NOT NULL,
  status TEXT NOT NULL,
  by_auto_renew BIGINT NOT NULL,
  issued_at_us BIGINT NOT NULL,
  due_at_us BIGINT NOT NULL,
  paid_at_us BIGINT NOT NULL,
  updated_at_us BIGINT NOT NULL,
  paid_currency TEXT NOT NULL,
  paid_micros BIGINT NOT NULL,
  charge_id BIGINT NOT NULL,
  PRIMARY KEY (rental_id, period)
);
CREATE TABLE rental_events (
  rental_id BIGINT NOT NULL REFERENCES rentals (id),
  sequence BIGINT NOT NULL,
  at_us BIGINT NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT NOT NULL,
  PRIMARY KEY (rental_id, sequence)
);
CREATE TABLE rental_charges (
  id BIGINT PRIMARY KEY,
  rental_id BIGINT NOT NULL REFERENCES rentals (id),
  customer_id BIGINT NOT NULL REFERENCES users (id),
  period BIGINT NOT NULL,
  kind TEXT NOT NULL,
  net_micros BIGINT NOT NULL,
  tax_micros BIGINT NOT NULL,
  gross_micros BIGINT NOT NULL,
  tax_lines_json TEXT NOT NULL,
  paid_currency TEXT NOT NULL,
  paid_micros BIGINT NOT NULL,
  period_start_us BIGINT NOT NULL,
  period_end_us BIGINT NOT NULL,
  at_us BIGINT NOT NULL,
  transfer_ids TEXT NOT NULL
);
CREATE INDEX rental_charges_by_rental ON rental_charges (rental_id);
)sql"},
      {6, "notifications",
       R"sql(
CREATE TABLE notifications (
  id BIGINT PRIMARY KEY,
  user_id BIGINT NOT NULL REFERENCES users (id),
  kind TEXT NOT NULL,
  subject TEXT NOT NULL,
  message TEXT NOT NULL,
  data_json TEXT NOT NULL,
  created_at_us BIGINT NOT NULL
);
CREATE INDEX notifications_by_user ON notifications (user_id);
CREATE TABLE account_webhooks (
  user_id BIGINT PRIMARY KEY REFERENCES users (id),
  url TEXT NOT NULL,
  secret TEXT NOT NULL,
  created_at_us BIGINT NOT NULL,
  updated_at_us BIGINT NOT NULL
);
CREATE TABLE webhook_deliveries (
  id BIGINT PRIMARY KEY,
  user_id BIGINT NOT NULL REFERENCES users (id),
  notification_id BIGINT NOT NULL,
  url TEXT NOT NULL,
  body TEXT NOT NULL,
  status TEXT NOT NULL,
  attempts BIGINT NOT NULL,
  next_attempt_at_us BIGINT NOT NULL,
  last_status_code BIGINT NOT NULL,
  last_error TEXT NOT NULL,
  created_at_us BIGINT NOT NULL,
  updated_at_us BIGINT NOT NULL
);
CREATE INDEX webhook_deliveries_by_user ON webhook_deliveries (user_id);
)sql"},
      {7, "market_machine_condition",
       R"sql(
ALTER TABLE market_machines ADD COLUMN offline_since_us BIGINT NOT NULL DEFAULT 0;
ALTER TABLE market_machines ADD COLUMN blocked_mask BIGINT NOT NULL DEFAULT 0;
ALTER TABLE market_machines ADD COLUMN hold_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE market_leases ADD COLUMN paused_at_us BIGINT NOT NULL DEFAULT 0;
ALTER TABLE market_leases ADD COLUMN shift_us BIGINT NOT NULL DEFAULT 0;
ALTER TABLE market_leases ADD COLUMN credited_micros BIGINT NOT NULL DEFAULT 0;
ALTER TABLE market_leases ADD COLUMN credited_provider_micros BIGINT NOT NULL DEFAULT 0;
)sql"},
      {8, "agents",
       R"sql(
CREATE TABLE ssh_keys (
  id BIGINT PRIMARY KEY,
  user_id BIGINT NOT NULL REFERENCES users (id),
  name TEXT NOT NULL,
  key_type TEXT NOT NULL,
  key_blob TEXT NOT NULL,
  key_comment TEXT NOT NULL,
  created_at_us BIGINT NOT NULL
);
CREATE INDEX ssh_keys_by_user ON ssh_keys (user_id);
CREATE TABLE agent_hosts (
  id BIGINT PRIMARY KEY,
  kind TEXT NOT NULL,
  owner_id BIGINT NOT NULL,
  machine_id BIGINT NOT NULL,
  node_id BIGINT NOT NULL,
  credential_hash TEXT NOT NULL,
  enrolled_at_us BIGINT NOT NULL,
  revoked_at_us BIGINT NOT NULL,
  last_seen_us BIGINT NOT NULL,
  hostname TEXT NOT NULL,
  public_host TEXT NOT NULL,
  agent_version TEXT NOT NULL,
  inventory_source TEXT NOT NULL,
  inventory_error TEXT NOT NULL,
  driver_version TEXT NOT NULL,
  cuda_version TEXT NOT NULL,
  ram_mib BIGINT NOT NULL,
  vcpus BIGINT NOT NULL,
  nvme_free_gb BIGINT NOT NULL,
  bound_uuids TEXT NOT NULL
);
CREATE TABLE agent_gpus (
  host_id BIGINT NOT NULL REFERENCES agent_hosts (id),
  gpu_index BIGINT NOT NULL,
  uuid TEXT NOT NULL,
  name TEXT NOT NULL,
  memory_mib BIGINT NOT NULL,
  pcie_gen BIGINT NOT NULL,
  pcie_width BIGINT NOT NULL,
  healthy BIGINT NOT NULL,
  health TEXT NOT NULL,
  PRIMARY KEY (host_id, gpu_index)
);
CREATE TABLE agent_enrolment_tokens (
  token_hash TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  machine_id BIGINT NOT NULL,
  node_id BIGINT NOT NULL,
  created_by BIGINT NOT NULL REFERENCES users (id),
  created_at_us BIGINT NOT NULL,
  expires_at_us BIGINT NOT NULL,
  used_at_us BIGINT NOT NULL,
  host_id BIGINT NOT NULL,
  nonce_hash TEXT NOT NULL
);
CREATE TABLE agent_workloads (
  id TEXT PRIMARY KEY,
  host_id BIGINT NOT NULL REFERENCES agent_hosts (id),
  state TEXT NOT NULL,
  ssh_port BIGINT NOT NULL,
  detail TEXT NOT NULL,
  updated_at_us BIGINT NOT NULL,
  egress_bytes BIGINT NOT NULL,
  tx_counter_bytes BIGINT NOT NULL,
  last_sample_at_us BIGINT NOT NULL
);
CREATE TABLE agent_usage_hours (
  workload_id TEXT NOT NULL,
  hour_us BIGINT NOT NULL,
  egress_bytes BIGINT NOT NULL,
  gpu_utilization_sum BIGINT NOT NULL,
  samples BIGINT NOT NULL,
  PRIMARY KEY (workload_id, hour_us)
);
CREATE TABLE launch_specs (
  bid_id BIGINT PRIMARY KEY,
  image TEXT NOT NULL,
  created_at_us BIGINT NOT NULL
);
)sql"},
      {9, "rental_downtime_credits",
       R"sql(
CREATE TABLE rental_downtime_credits (
  id BIGINT PRIMARY KEY,
  rental_id BIGINT NOT NULL,
  host_id BIGINT NOT NULL,
  customer_id BIGINT NOT NULL REFERENCES users (id),
  from_us BIGINT NOT NULL,
  to_us BIGINT NOT NULL,
  multiplier_ppm BIGINT NOT NULL,
  usd_micros BIGINT NOT NULL,
  currency TEXT NOT NULL,
  amount_micros BIGINT NOT NULL,
  created_at_us BIGINT NOT NULL
);
CREATE INDEX rental_downtime_credits_by_rental ON rental_downtime_credits (rental_id);
)sql"},
      // High availability: the single row (id 1) naming the writer term that may commit, the node
      // that holds it and where standbys forward requests (store.h: fencing).
      {10, "engine_writer",
       R"sql(
CREATE TABLE engine_writer (
  id BIGINT PRIMARY KEY,
  term BIGINT NOT NULL,
  node TEXT NOT NULL,
  address TEXT NOT NULL,
  proxy_secret TEXT NOT NULL,
  since_us BIGINT NOT NULL
);
)sql"},
      {11, "storage",
       R"sql(
ALTER TABLE rentals ADD COLUMN extra_nvme_micros BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rentals ADD COLUMN nvme_addons BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rental_charges ADD COLUMN extra_nvme_gb BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rental_charges ADD COLUMN extra_nvme_micros BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rental_charges ADD COLUMN nvme_addon BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rental_charges ADD COLUMN refund_of BIGINT NOT NULL DEFAULT 0;
CREATE TABLE storage_hosts (
  id BIGINT PRIMARY KEY,
  region TEXT NOT NULL,
  hostname TEXT NOT NULL,
  capacity_tb BIGINT NOT NULL,
  state TEXT NOT NULL,
  created_at_us BIGINT NOT NULL,
  updated_at_us BIGINT NOT NULL
);
CREATE TABLE storage_volumes (
  id BIGINT PRIMARY KEY,
  customer_id BIGINT NOT NULL REFERENCES users (id),
  name TEXT NOT NULL,
  region TEXT NOT NULL,
  size_tb BIGINT NOT NULL,
  hosts TEXT NOT NULL,
  attachments TEXT NOT NULL,
  restored_from BIGINT NOT NULL,
  grows BIGINT NOT NULL,
  created_at_us BIGINT NOT NULL,
  updated_at_us BIGINT NOT NULL,
  events BIGINT NOT NULL,
  currency TEXT NOT NULL,
  price_micros_per_tb_month BIGINT NOT NULL,
  anchor_us BIGINT NOT NULL,
  days_paid BIGINT NOT NULL,
  state TEXT NOT NULL,
  unpaid_since_us BIGINT NOT NULL,
  detach_at_us BIGINT NOT NULL,
  delete_at_us BIGINT NOT NULL,
  retry_at_us BIGINT NOT NULL,
  deleted_at_us BIGINT NOT NULL,
  delete_reason TEXT NOT NULL
);
CREATE INDEX storage_volumes_by_customer ON storage_volumes (customer_id);
CREATE TABLE storage_snapshots (
  id BIGINT PRIMARY KEY,
  customer_id BIGINT NOT NULL REFERENCES users (id),
  name TEXT NOT NULL,
  region TEXT NOT NULL,
  size_tb BIGINT NOT NULL,
  source TEXT NOT NULL,
  source_id BIGINT NOT NULL,
  hosts TEXT NOT NULL,
  created_at_us BIGINT NOT NULL,
  updated_at_us BIGINT NOT NULL,
  events BIGINT NOT NULL,
  currency TEXT NOT NULL,
  price_micros_per_tb_month BIGINT NOT NULL,
  anchor_us BIGINT NOT NULL,
  days_paid BIGINT NOT NULL,
  state TEXT NOT NULL,
  unpaid_since_us BIGINT NOT NULL,
  detach_at_us BIGINT NOT NULL,
  delete_at_us BIGINT NOT NULL,
  retry_at_us BIGINT NOT NULL,
  deleted_at_us BIGINT NOT NULL,
  delete_reason TEXT NOT NULL
);
CREATE INDEX storage_snapshots_by_customer ON storage_snapshots (customer_id);
CREATE TABLE storage_events (
  item TEXT NOT NULL,
  subject_id BIGINT NOT NULL,
  sequence BIGINT NOT NULL,
  at_us BIGINT NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT NOT NULL,
  PRIMARY KEY (item, subject_id, sequence)
);
CREATE TABLE storage_charges (
  id BIGINT PRIMARY KEY,
  customer_id BIGINT NOT NULL REFERENCES users (id),
  kind TEXT NOT NULL,
  subject_id BIGINT NOT NULL,
  size_tb BIGINT NOT NULL,
  first_day BIGINT NOT NULL,
  last_day BIGINT NOT NULL,
  growth BIGINT NOT NULL,
  egress_gb BIGINT NOT NULL,
  egress_gb_from BIGINT NOT NULL,
  period BIGINT NOT NULL,
  net_micros BIGINT NOT NULL,
  tax_micros BIGINT NOT NULL,
  gross_micros BIGINT NOT NULL,
  tax_lines_json TEXT NOT NULL,
  paid_currency TEXT NOT NULL,
  paid_micros BIGINT NOT NULL,
  period_start_us BIGINT NOT NULL,
  period_end_us BIGINT NOT NULL,
  at_us BIGINT NOT NULL,
  transfer_ids TEXT NOT NULL
);
CREATE INDEX storage_charges_by_customer ON storage_charges (customer_id);
CREATE TABLE egress_meters (
  rental_id BIGINT NOT NULL REFERENCES rentals (id),
  period BIGINT NOT NULL,
  customer_id BIGINT NOT NULL REFERENCES users (id),
  currency TEXT NOT NULL,
  allowance_bytes BIGINT NOT NULL,
  used_bytes BIGINT NOT NULL,
  billed_gb BIGINT NOT NULL,
  owed_gb BIGINT NOT NULL,
  retry_at_us BIGINT NOT NULL,
  samples BIGINT NOT NULL,
  last_sample_at_us BIGINT NOT NULL,
  updated_at_us BIGINT NOT NULL,
  PRIMARY KEY (rental_id, period)
);
)sql"},
      {12, "billing",
       R"sql(
CREATE TABLE billing_profiles (
  user_id BIGINT PRIMARY KEY REFERENCES users (id),
  country TEXT NOT NULL,
  business_name TEXT NOT NULL,
  vat_id TEXT NOT NULL,
  address TEXT NOT NULL,
  updated_at_us BIGINT NOT NULL,
  evidence_country TEXT NOT NULL,
  evidence_address TEXT NOT NULL,
  evidence_ip_country TEXT NOT NULL,
  evidence_at_us BIGINT NOT NULL,
  wallet_hold TEXT NOT NULL,
  wallet_hold_since_us BIGINT NOT NULL
);
CREATE TABLE tax_rate_changes (
  seq BIGINT PRIMARY KEY,
  kind TEXT NOT NULL,
  country TEXT NOT NULL,
  rate_ppm BIGINT NOT NULL,
  at_us BIGINT NOT NULL,
  note TEXT NOT NULL,
  admin_id BIGINT NOT NULL,
  created_at_us BIGINT NOT NULL
);
CREATE TABLE tax_documents (
  id BIGINT PRIMARY KEY,
  kind TEXT NOT NULL,
  number TEXT NOT NULL UNIQUE,
  year BIGINT NOT NULL,
  sequence BIGINT NOT NULL,
  user_id BIGINT NOT NULL REFERENCES users (id),
  source TEXT NOT NULL UNIQUE,
  title TEXT NOT NULL,
  issued_at_us BIGINT NOT NULL,
  supply_from_us BIGINT NOT NULL,
  supply_until_us BIGINT NOT NULL,
  currency TEXT NOT NULL,
  seller_name TEXT NOT NULL,
  seller_address TEXT NOT NULL,
  seller_country TEXT NOT NULL,
  seller_vat_id TEXT NOT NULL,
  buyer_name TEXT NOT NULL,
  buyer_address TEXT NOT NULL,
  buyer_country TEXT NOT NULL,
  buyer_vat_id TEXT NOT NULL,
  net_micros BIGINT NOT NULL,
  tax_micros BIGINT NOT NULL,
  gross_micros BIGINT NOT NULL,
  reverse_charge BIGINT NOT NULL,
  tax_note TEXT NOT NULL,
  evidence_country TEXT NOT NULL,
  evidence_address TEXT NOT NULL,
  evidence_ip_country TEXT NOT NULL,
  evidence_at_us BIGINT NOT NULL,
  corrects TEXT NOT NULL,
  reason TEXT NOT NULL,
  UNIQUE (kind, year, sequence)
);
CREATE INDEX tax_documents_by_user ON tax_documents (user_id);
CREATE TABLE tax_document_lines (
  document_id BIGINT NOT NULL REFERENCES tax_documents (id),
  line BIGINT NOT NULL,
  description TEXT NOT NULL,
  quantity BIGINT NOT NULL,
  unit TEXT NOT NULL,
  unit_net_micros BIGINT NOT NULL,
  net_micros BIGINT NOT NULL,
  tax_country TEXT NOT NULL,
  rate_ppm BIGINT NOT NULL,
  reverse_charge BIGINT NOT NULL,
  tax_micros BIGINT NOT NULL,
  gross_micros BIGINT NOT NULL,
  PRIMARY KEY (document_id, line)
);
CREATE TABLE spot_usage (
  user_id BIGINT NOT NULL REFERENCES users (id),
  month_start_us BIGINT NOT NULL,
  lease_id BIGINT NOT NULL,
  tax_country TEXT NOT NULL,
  rate_ppm BIGINT NOT NULL,
  reverse_charge BIGINT NOT NULL,
  gpu TEXT NOT NULL,
  gpus BIGINT NOT NULL,
  price_micros BIGINT NOT NULL,
  hours BIGINT NOT NULL,
  net_micros BIGINT NOT NULL,
  tax_micros BIGINT NOT NULL,
  first_hour_at_us BIGINT NOT NULL,
  last_hour_at_us BIGINT NOT NULL,
  document_id BIGINT NOT NULL,
  PRIMARY KEY (user_id, month_start_us, lease_id, tax_country, rate_ppm, reverse_charge)
);
)sql"},
      // Start-up loads only open market records and history lists page from the store (issue 15):
      // indexes for both, and the providers' history totals kept as running totals (backfilled
      // here from every lease and paid payout; fee per hour rounded half-even exactly as
      // MulDivHalfEven does for positive amounts).
      {13, "market_history",
       R"sql(
CREATE TABLE market_provider_totals (
  provider_id BIGINT PRIMARY KEY REFERENCES users (id),
  gross_micros BIGINT NOT NULL,
  fee_micros BIGINT NOT NULL,
  gpu_hours BIGINT NOT NULL,
  lease_hours BIGINT NOT NULL,
  credited_micros BIGINT NOT NULL,
  paid_out_micros BIGINT NOT NULL
);
INSERT INTO market_provider_totals (provider_id, gross_micros, fee_micros, gpu_hours, lease_hours,
                                    credited_micros, paid_out_micros)
SELECT provider_id, SUM(gross), SUM(fee), SUM(gpu_hours), SUM(lease_hours), SUM(credited),
       SUM(paid_out)
FROM (
  SELECT provider_id, price_micros * gpus * hours_paid AS gross,
         ((price_micros * gpus * fee_ppm) / 1000000 +
          CASE WHEN (price_micros * gpus * fee_ppm) % 1000000 > 500000 OR
                    ((price_micros * gpus * fee_ppm) % 1000000 = 500000 AND
                     ((price_micros * gpus * fee_ppm) / 1000000) % 2 = 1)
               THEN 1 ELSE 0 END) * hours_paid AS fee,
         gpus * hours_paid AS gpu_hours, hours_paid AS lease_hours,
         credited_provider_micros AS credited, 0 AS paid_out
  FROM market_leases
  UNION ALL
  SELECT provider_id, 0, 0, 0, 0, 0, amount_micros FROM market_payouts WHERE status = 'paid'
) history
GROUP BY provider_id;
CREATE INDEX market_bids_by_status ON market_bids (status);
CREATE INDEX market_asks_by_status ON market_asks (status);
CREATE INDEX market_leases_by_status ON market_leases (status);
CREATE INDEX market_payouts_by_status ON market_payouts (status);
CREATE INDEX market_bids_by_customer_id ON market_bids (customer_id, id);
CREATE INDEX market_leases_by_customer_id ON market_leases (customer_id, id);
CREATE INDEX market_leases_by_provider_id ON market_leases (provider_id, id);
CREATE INDEX market_asks_by_provider_id ON market_asks (provider_id, id);
CREATE INDEX market_payouts_by_provider_id ON market_payouts (provider_id, id);
CREATE INDEX market_trades_by_gpu_id ON market_trades (gpu, id);
DROP INDEX market_bids_by_customer;
DROP INDEX market_leases_by_customer;
DROP INDEX market_leases_by_provider;
DROP INDEX market_payouts_by_provider;
)sql"},
      // The ledger out of memory: each account's totals persisted beside the transfers (the engine
      // upserts the changed ones in every commit), a pending transfer's row says whether it was
      // posted or voided, and the indexes that start-up (open holds) and history pages use.
      // Built here once from the history: the totals as a replay would add them up.
      {14, "ledger_accounts",
       R"sql(
CREATE TABLE ledger_accounts (
  kind TEXT NOT NULL,
  owner_id BIGINT NOT NULL,
  currency TEXT NOT NULL,
  debits_posted BIGINT NOT NULL,
  credits_posted BIGINT NOT NULL,
  debits_pending BIGINT NOT NULL,
  credits_pending BIGINT NOT NULL,
  PRIMARY KEY (kind, owner_id, currency)
);
UPDATE ledger_transfers SET state = 'posted'
  WHERE kind = 'pending' AND id IN (SELECT pending_id FROM ledger_transfers
                                    WHERE kind = 'post_pending');
UPDATE ledger_transfers SET state = 'voided'
  WHERE kind = 'pending' AND id IN (SELECT pending_id FROM ledger_transfers
                                    WHERE kind = 'void_pending');
INSERT INTO ledger_accounts (kind, owner_id, currency, debits_posted, credits_posted,
                             debits_pending, credits_pending)
SELECT kind, owner_id, currency, SUM(dp), SUM(cp), SUM(dq), SUM(cq) FROM (
  SELECT debit_kind AS kind, debit_owner AS owner_id, debit_currency AS currency,
         CASE WHEN kind IN ('single_phase', 'post_pending') THEN amount_micros ELSE 0 END AS dp,
         0 AS cp,
         CASE WHEN kind = 'pending' AND state = 'pending' THEN amount_micros ELSE 0 END AS dq,
         0 AS cq
  FROM ledger_transfers
  UNION ALL
  SELECT credit_kind, credit_owner, credit_currency, 0,
         CASE WHEN kind IN ('single_phase', 'post_pending') THEN amount_micros ELSE 0 END, 0,
         CASE WHEN kind = 'pending' AND state = 'pending' THEN amount_micros ELSE 0 END
  FROM ledger_transfers
) legs
GROUP BY kind, owner_id, currency;
INSERT INTO engine_meta (name, value)
SELECT 'ledger_accounts_through', sequence FROM ledger_transfers
WHERE sequence = (SELECT MAX(sequence) FROM ledger_transfers);
CREATE INDEX ledger_transfers_by_state ON ledger_transfers (state, sequence);
CREATE INDEX ledger_transfers_by_debit_owner ON ledger_transfers (debit_owner, sequence);
CREATE INDEX ledger_transfers_by_credit_owner ON ledger_transfers (credit_owner, sequence);
)sql"},
      // Billing's start-up reads only the spot usage not yet on a statement (document_id 0), in
      // the order the engine keeps it, from this index: no full scan of a table that keeps every
      // lease-month ever billed, and no sort (issue 15).
      {15, "spot_usage_open",
       R"sql(
CREATE INDEX spot_usage_by_document_id
  ON spot_usage (document_id, month_start_us, user_id, lease_id, first_hour_at_us);
)sql"},
      // Start-up's open holds from a partial index that holds only them: a transfer that is not
      // a pending hold never enters it, and a hold leaves it when it is posted or voided (the full
      // (state, sequence) index of migration 14 took an entry for every transfer ever made).
      {16, "ledger_open_holds_index",
       R"sql(
DROP INDEX ledger_transfers_by_state;
CREATE INDEX ledger_transfers_open ON ledger_transfers (sequence) WHERE state = 'pending';
)sql"},
      // Tax documents out of memory (engine/document_archive.h): the engine keeps the newest and
      // reads older ones back by number and source (their UNIQUE indexes), an account's list by
      // (user_id, id) pages, an invoice's credit notes from a partial index that holds only credit
      // notes, and a tax report's period by issue time.
      {17, "tax_documents_archive",
       R"sql(
CREATE INDEX tax_documents_by_user_id ON tax_documents (user_id, id);
DROP INDEX tax_documents_by_user;
CREATE INDEX tax_documents_credit_notes ON tax_documents (corrects) WHERE kind = 'credit_note';
CREATE INDEX tax_documents_by_issued ON tax_documents (issued_at_us);
)sql"},
      // Start-up's open orders, live leases and pending payouts from partial indexes that hold
      // only them: a row enters when it opens and leaves when it closes. The full (status)
      // indexes of migration 13 took an entry for every record ever made and moved it to another
      // status when it closed: two more B-tree writes for every cancelled bid, on the path of
      // every durable order (issue 15).
      {18, "market_open_rows_indexes",
       R"sql(
CREATE INDEX market_bids_resting ON market_bids (id) WHERE status = 'resting';
CREATE INDEX market_asks_open ON market_asks (id) WHERE status = 'open';
CREATE INDEX market_leases_active ON market_leases (id) WHERE status = 'active';
CREATE INDEX market_payouts_pending ON market_payouts (id) WHERE status = 'pending';
DROP INDEX market_bids_by_status;
DROP INDEX market_asks_by_status;
DROP INDEX market_leases_by_status;
DROP INDEX market_payouts_by_status;
)sql"},
      // Images and ports (issue 26): a listing's host port range for the leases' extra container
      // ports; a bid's extra ports ("8888,8000") and sealed registry credential (http/
      // registry_auth.h: never the secret in clear); the host ports the agent published
      // ("8888:41000,8000:41001"); a term rental's image, ports and sealed credential.
      {19, "launch_ports_and_registry_auth",
       R"sql(
ALTER TABLE market_machines ADD COLUMN port_range_first BIGINT NOT NULL DEFAULT 41000;
ALTER TABLE market_machines ADD COLUMN port_range_last BIGINT NOT NULL DEFAULT 41999;
ALTER TABLE launch_specs ADD COLUMN ports TEXT NOT NULL DEFAULT '';
ALTER TABLE launch_specs ADD COLUMN registry_auth TEXT NOT NULL DEFAULT '';
ALTER TABLE agent_workloads ADD COLUMN ports TEXT NOT NULL DEFAULT '';
CREATE TABLE rental_launch_specs (
  rental_id BIGINT PRIMARY KEY,
  image TEXT NOT NULL,
  ports TEXT NOT NULL,
  registry_auth TEXT NOT NULL,
  created_at_us BIGINT NOT NULL
);
)sql"},
      // A lease on a machine with a host agent is billed from when its workload runs: until then
      // it holds its first hour (market::Lease::start_deadline, hold_micros); a workload that
      // stopped after it ran pauses it (workload_down).
      {20, "lease_provisioning",
       R"sql(
ALTER TABLE market_leases ADD COLUMN start_deadline_us BIGINT NOT NULL DEFAULT 0;
ALTER TABLE market_leases ADD COLUMN hold_micros BIGINT NOT NULL DEFAULT 0;
ALTER TABLE market_leases ADD COLUMN workload_down BIGINT NOT NULL DEFAULT 0;
)sql"},
      // The size of a host's disk as its agent measures it (0: not reported): a listing's
      // disk_gb is checked against it as its vCPUs and RAM are.
      {21, "agent_disk_total",
       R"sql(
ALTER TABLE agent_hosts ADD COLUMN disk_total_gb BIGINT NOT NULL DEFAULT 0;
)sql"},
      // Scoped API keys (engine/api_keys.h): only the secret's SHA-256 is stored; the day's spending
      // against the key's cap is kept on its row (spend_day, spent_micros).
      {22, "api_keys",
       R"sql(
CREATE TABLE api_keys (
  id BIGINT PRIMARY KEY,
  user_id BIGINT NOT NULL REFERENCES users (id),
  name TEXT NOT NULL,
  secret_hash TEXT NOT NULL UNIQUE,
  scopes TEXT NOT NULL,
  spend_cap_micros BIGINT NOT NULL,
  cap_currency TEXT NOT NULL,
  networks TEXT NOT NULL,
  created_at_us BIGINT NOT NULL,
  expires_at_us BIGINT NOT NULL,
  spend_day BIGINT NOT NULL,
  spent_micros BIGINT NOT NULL
);
CREATE INDEX api_keys_by_user ON api_keys (user_id);
)sql"},
      // Network volumes on Ceph (issue 27): a volume's provisioning state on its region's cluster,
      // the subvolume's path and confirmed quota, whether it was removed, and its attachments'
      // cephx clients ("<rental>:<rw|r>:<sealed key>;..."); whether a snapshot is a Ceph one and
      // taken / removed there.
      {23, "ceph_volumes",
       R"sql(
ALTER TABLE storage_volumes ADD COLUMN provisioning TEXT NOT NULL DEFAULT '';
ALTER TABLE storage_volumes ADD COLUMN provision_error TEXT NOT NULL DEFAULT '';
ALTER TABLE storage_volumes ADD COLUMN provision_deadline_us BIGINT NOT NULL DEFAULT 0;
ALTER TABLE storage_volumes ADD COLUMN ceph_path TEXT NOT NULL DEFAULT '';
ALTER TABLE storage_volumes ADD COLUMN ceph_quota_tb BIGINT NOT NULL DEFAULT 0;
ALTER TABLE storage_volumes ADD COLUMN ceph_removed BIGINT NOT NULL DEFAULT 0;
ALTER TABLE storage_volumes ADD COLUMN ceph_clients TEXT NOT NULL DEFAULT '';
ALTER TABLE storage_snapshots ADD COLUMN ceph BIGINT NOT NULL DEFAULT 0;
ALTER TABLE storage_snapshots ADD COLUMN ceph_taken BIGINT NOT NULL DEFAULT 0;
ALTER TABLE storage_snapshots ADD COLUMN ceph_removed BIGINT NOT NULL DEFAULT 0;
)sql"},
      // Two-factor sign-in (engine/totp.h): one row per account that started or finished a TOTP
      // enrolment (enabled 0: pending), the last step a code was accepted for (replay refused
      // across restarts), the SHA-256 of the unused recovery codes. Providers' payout
      // destinations (engine/payout_destinations.h): where a payout may be sent, and where each
      // payout that named one goes (a copy: removing the destination later changes nothing).
      {24, "totp_and_payout_destinations",
       R"sql(
CREATE TABLE account_totp (
  user_id BIGINT PRIMARY KEY REFERENCES users (id),
  secret TEXT NOT NULL,
  enabled BIGINT NOT NULL,
  last_step BIGINT NOT NULL,
  recovery_hashes TEXT NOT NULL,
  created_at_us BIGINT NOT NULL,
  enabled_at_us BIGINT NOT NULL
);
CREATE TABLE payout_destinations (
  id BIGINT PRIMARY KEY,
  user_id BIGINT NOT NULL REFERENCES users (id),
  kind TEXT NOT NULL,
  address TEXT NOT NULL,
  label TEXT NOT NULL,
  created_at_us BIGINT NOT NULL
);
CREATE INDEX payout_destinations_by_user ON payout_destinations (user_id);
CREATE TABLE payout_targets (
  payout_id BIGINT PRIMARY KEY,
  destination_id BIGINT NOT NULL,
  kind TEXT NOT NULL,
  address TEXT NOT NULL,
  label TEXT NOT NULL
);
)sql"},
      // The audit log (issue 30): append-only events, paged newest first per account by
      // (account_id, id); and when each API key first authenticated a request.
      {25, "audit_log",
       R"sql(
CREATE TABLE audit_events (
  id BIGINT PRIMARY KEY,
  at_us BIGINT NOT NULL,
  account_id BIGINT NOT NULL,
  actor TEXT NOT NULL,
  kind TEXT NOT NULL,
  remote_address TEXT NOT NULL,
  user_agent TEXT NOT NULL,
  request_id TEXT NOT NULL,
  detail TEXT NOT NULL
);
CREATE INDEX audit_events_by_account ON audit_events (account_id, id);
ALTER TABLE api_keys ADD COLUMN first_used_at_us BIGINT NOT NULL DEFAULT 0;
)sql"},
      // Stock and price alerts (engine/alerts.h, issue 29): one row per alert an account holds
      // (cancelling deletes it); start-up loads them all and indexes them in memory, and the
      // account's list is served from memory, so the table needs no index beyond its key.
      {26, "alerts",
       R"sql(
CREATE TABLE alerts (
  id BIGINT PRIMARY KEY,
  user_id BIGINT NOT NULL REFERENCES users (id),
  kind TEXT NOT NULL,
  gpu TEXT NOT NULL,
  region TEXT NOT NULL,
  count BIGINT NOT NULL,
  max_price_micros BIGINT NOT NULL,
  created_at_us BIGINT NOT NULL,
  fired_count BIGINT NOT NULL,
  last_fired_at_us BIGINT NOT NULL
);
)sql"},
      // Multi-node quote requests (issue 28): a job larger than one 8-card node, its recomputation
      // by the server, the customer's contact, and the admin's answer. Listed per account newest
      // first by (user_id, id); every account's by the primary key.
      {27, "quote_requests",
       R"sql(
CREATE TABLE quote_requests (
  id BIGINT PRIMARY KEY,
  user_id BIGINT NOT NULL REFERENCES users (id),
  status TEXT NOT NULL,
  model TEXT NOT NULL,
  workload TEXT NOT NULL,
  required_bytes BIGINT NOT NULL,
  summary TEXT NOT NULL,
  job TEXT NOT NULL,
  sizing TEXT NOT NULL,
  contact TEXT NOT NULL,
  note TEXT NOT NULL,
  created_at_us BIGINT NOT NULL,
  updated_at_us BIGINT NOT NULL,
  answered_by BIGINT NOT NULL,
  answered_at_us BIGINT NOT NULL,
  price TEXT NOT NULL,
  terms TEXT NOT NULL
);
CREATE INDEX quote_requests_by_user ON quote_requests (user_id, id);
)sql"},
  };
  return migrations;
}

}  // namespace gpuhub::store
