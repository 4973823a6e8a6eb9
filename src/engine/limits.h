// Named limits of the engine and its domains (accounts, sessions, idempotency, top-ups).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/clock.h"

namespace gpuhub::engine {

// Commands applied and committed together in one store transaction (group commit).
inline constexpr std::size_t kMaxCommandsPerBatch = 1024;

// The ledger's window: the newest transfers kept in memory (beside the account totals and every
// open hold); older ones are read from the store when asked for. ~300 bytes each, so ~30 MB
// whatever the length of history. The window is trimmed back to this size once it has grown by a
// fifth, after a commit (the trim walks every account's recent history).
inline constexpr std::size_t kLedgerTransfersInMemory = 100'000;
// Transfers between two checkpoints of the ledger's account totals (engine/wallets.h): a start-up
// replays at most this many onto the stored totals (milliseconds); fewer rows in every commit.
inline constexpr std::int64_t kLedgerAccountsCheckpointTransfers = 10'000;
// Commands waiting for the writer; beyond this Submit answers unavailable (back-pressure instead
// of unbounded memory).
inline constexpr std::size_t kMaxQueuedCommands = 100'000;
// How often the writer runs the Tick hooks with the real clock when idle.
inline constexpr std::int64_t kTickIntervalMicros = 1 * kMicrosPerSecond;
// Intermediate runs of the tick hooks inside one manual clock advance (Engine::AdvanceClockTo): one
// per time a TickDue names, in practice one per host that falls silent during the advance. Past
// this the rest of the advance runs in one step.
inline constexpr std::int64_t kMaxTickStepsPerAdvance = 100'000;

// High availability (engine.h): a standby asks for the writer lock (and re-reads who the writer
// is) this often, so a takeover starts at most this long after the lock is free.
inline constexpr std::int64_t kStandbyPollMicros = 100'000;
// An idle writer proves this often that the database still names its term (a writer that commits
// proves it with every commit), so one cut off from the database notices within about a second.
inline constexpr std::int64_t kWriterCheckIntervalMicros = 1 * kMicrosPerSecond;
// A writer that lost its lock (its session broke) tries this long to take it straight back before
// it answers what was queued `unavailable` and waits as a standby: a lone node whose connection
// blipped keeps serving without failing more than the batch in flight.
inline constexpr std::int64_t kRetakeWriterLockMicros = 1 * kMicrosPerSecond;

// Usernames: 3..32 bytes of [a-z0-9_.-] after folding ASCII letters to lower case, starting with a
// letter or digit (so "Alice" and "alice" are the same account).
inline constexpr std::size_t kMinUsernameBytes = 3;
inline constexpr std::size_t kMaxUsernameBytes = 32;
// Passwords: at least 10 characters (code points, engine/account_rules.h), at most 1024 bytes
// (Argon2 hashes any length, but a megabyte "password" is a denial-of-service attempt, not a
// secret).
inline constexpr std::size_t kMinPasswordCharacters = 10;
inline constexpr std::size_t kMaxPasswordBytes = 1024;
// Bearer sessions live 30 days, and a user keeps at most 50: a login beyond that ends the user's
// oldest session (by creation time; engine/accounts.h).
inline constexpr std::int64_t kSessionLifetimeMicros = 30 * kMicrosPerDay;
inline constexpr std::size_t kMaxSessionsPerUser = 50;
inline constexpr std::size_t kMaxUsers = 10'000'000;
// API keys (engine/api_keys.h): at most 25 per account (expired ones count until revoked); they
// live 90 days unless asked otherwise, at most 365; names of 1..64 printable characters; at most
// 16 networks in an allow-list.
inline constexpr std::size_t kMaxApiKeysPerUser = 25;
inline constexpr std::int64_t kDefaultApiKeyLifetimeMicros = 90 * kMicrosPerDay;
inline constexpr std::int64_t kMaxApiKeyLifetimeMicros = 365 * kMicrosPerDay;
inline constexpr std::size_t kMaxApiKeyNameBytes = 64;
inline constexpr std::size_t kMaxApiKeyNetworks = 16;
inline constexpr std::size_t kMaxApiKeyNetworkBytes = 64;

// Idempotency keys (Stripe's semantics): 1..255 printable ASCII characters, kept 24 hours.
inline constexpr std::size_t kMaxIdempotencyKeyBytes = 255;
inline constexpr std::int64_t kIdempotencyKeyLifetimeMicros = 24 * kMicrosPerHour;
// A stored response larger than this is not kept (the request is still answered).
inline constexpr std::size_t kMaxStoredResponseBytes = 64 * 1024;

}  // namespace gpuhub::engine

namespace gpuhub::engine {

// Top-up invoices: fiat amounts with at most 2 decimals, 1.00 .. 100,000.00 per invoice.
inline constexpr int kTopupFractionDigits = 2;
inline constexpr std::int64_t kMinTopupMicros = 1'000'000;
inline constexpr std::int64_t kMaxTopupMicros = 100'000LL * 1'000'000;
// Unpaid invoices a user may have open at once (each is a row and a processor-side invoice).
inline constexpr std::size_t kMaxOpenInvoicesPerUser = 20;
// An invoice nobody paid is expired by the engine after this long (the processor's own expiry is
// shorter; a late InvoiceSettled still credits an expired invoice: the money did arrive).
inline constexpr std::int64_t kInvoiceLifetimeMicros = 24 * kMicrosPerHour;
// BTCPay top-ups: payments recorded per invoice (BTCPay takes any number of partial payments),
// the largest single payment accepted (a typo or a hostile fake would be refused, not credited),
// the rounding that a fully settled invoice may be short by per payment (half a cent: each
// payment's fiat value is rounded half-even to cents once), and how long the reconciliation pass
// keeps reading an invoice back (BTCPay monitors an expired invoice for late payments for a day by
// default; a week leaves room for a long outage).
inline constexpr std::size_t kMaxPaymentsPerTopup = 1000;
inline constexpr std::int64_t kMaxTopupPaymentMicros = 10'000'000LL * 1'000'000;
inline constexpr std::int64_t kRoundingMicrosPerPayment = 5'000;
inline constexpr std::int64_t kPaymentWatchMicros = 7 * 24 * kMicrosPerHour;
// Admin manual credits: at most this much in one credit (a typo guard: 1,000,000 units).
inline constexpr std::int64_t kMaxManualCreditMicros = 1'000'000LL * 1'000'000;
// Conversions: amounts with up to 6 decimals, at least 0.01 of the source currency.
inline constexpr std::int64_t kMinConversionMicros = 10'000;

}  // namespace gpuhub::engine

namespace gpuhub::engine {

// Notifications (engine/notifications.h): what an account keeps (the oldest beyond it is dropped),
// and the pages of GET /v1/notifications.
inline constexpr std::size_t kMaxNotificationsPerAccount = 500;
inline constexpr std::size_t kDefaultNotificationsPageSize = 50;
inline constexpr std::size_t kMaxNotificationsPageSize = 200;
inline constexpr std::size_t kMaxNotificationKindBytes = 64;
inline constexpr std::size_t kMaxNotificationSubjectBytes = 128;
inline constexpr std::size_t kMaxNotificationMessageBytes = 2048;
inline constexpr std::size_t kMaxNotificationDataBytes = 8 * 1024;

// Account webhooks: the URL (http or https, no credentials in it) and the signing secret.
inline constexpr std::size_t kMaxWebhookUrlBytes = 2048;
inline constexpr std::size_t kWebhookSecretBytes = 32;  // random bytes; shown as "whsec_" + hex
// Deliveries: attempts at these delays after the notification (about 45 h in all), then failed.
inline constexpr std::int64_t kWebhookRetryDelaysMicros[] = {
    0,
    1 * 60 * kMicrosPerSecond,
    5 * 60 * kMicrosPerSecond,
    30 * 60 * kMicrosPerSecond,
    2 * kMicrosPerHour,
    6 * kMicrosPerHour,
    12 * kMicrosPerHour,
    24 * kMicrosPerHour,
};
inline constexpr std::int64_t kMaxWebhookAttempts =
    sizeof(kWebhookRetryDelaysMicros) / sizeof(kWebhookRetryDelaysMicros[0]);
// A claimed delivery is not handed out again for this long (the sender has it in flight; if the
// server dies meanwhile it is retried after this: at-least-once).
inline constexpr std::int64_t kWebhookClaimMicros = 2 * 60 * kMicrosPerSecond;
// Pending deliveries an account may have queued (a dead endpoint must not grow the outbox without
// bound: beyond it the oldest pending one is marked failed), and finished ones kept for GET.
inline constexpr std::size_t kMaxPendingDeliveriesPerAccount = 200;
inline constexpr std::size_t kMaxFinishedDeliveriesPerAccount = 50;
// Deliveries handed to the sender at once.
inline constexpr std::size_t kMaxDeliveriesPerClaim = 32;
inline constexpr std::size_t kMaxDeliveryErrorBytes = 256;
// Billing: monthly statements issued per tick (the rest wait for the next tick, a second later
// with the real clock), admin tax rate changes kept in the log, and the note of one change.
inline constexpr std::size_t kMaxStatementsPerTick = 500;
inline constexpr std::size_t kMaxTaxRateChanges = 100'000;
inline constexpr std::size_t kMaxTaxRateNoteBytes = 200;
// Tax documents kept in memory: the newest ones (the window is trimmed back to this size once it
// has grown by a fifth, after a commit); older ones are read from the store when asked for
// (engine/document_archive.h), so memory does not grow with the years of invoices and their lines
// (a monthly statement has a line per lease): at most this many documents and, whatever their
// size, this many lines (~200 bytes each). Documents the archive reads at once when it walks many
// (a tax report's period, the admin check).
inline constexpr std::size_t kTaxDocumentsInMemory = 2'000;
inline constexpr std::size_t kTaxDocumentLinesInMemory = 50'000;
inline constexpr std::int64_t kDocumentArchiveChunk = 1'000;
// Billing profiles kept (one per account at most, so the account limit bounds it too).
inline constexpr std::size_t kMaxBillingProfiles = kMaxUsers;

// ----- Storage (engine/storage.h) ------------------------------------------------------------
// --demo: storage hosts per region and their capacity (three replicas need three hosts).
inline constexpr int kDemoStorageHostsPerRegion = 4;
inline constexpr std::int64_t kDemoStorageHostTb = 500;

}  // namespace gpuhub::engine

namespace gpuhub::engine {

// SSH public keys on an account (engine/ssh_keys.h): what the host agent writes into a rented
// machine's authorized_keys.
inline constexpr std::size_t kMaxSshKeysPerUser = 20;
// Stock and price alerts (engine/alerts.h) an account may hold at once: enough for every card and
// market a person watches; each is one entry of the alert index.
inline constexpr std::size_t kMaxAlertsPerAccount = 25;
inline constexpr std::size_t kMaxSshKeyLineBytes = 8 * 1024;  // a 16384-bit RSA key is ~2.8 KB
inline constexpr std::size_t kMaxSshKeyNameBytes = 64;
inline constexpr std::size_t kMaxSshKeyCommentBytes = 256;
inline constexpr int kMinRsaKeyBits = 2048;
inline constexpr int kMaxRsaKeyBits = 16384;

}  // namespace gpuhub::engine

namespace gpuhub::engine {

// Host agents (engine/agents.h). An agent reports every 15 s; three missed heartbeats (45 s) and
// its machine is offline. It sends usage samples every minute.
inline constexpr std::int64_t kAgentHeartbeatIntervalSeconds = 15;
inline constexpr std::int64_t kAgentUsageIntervalSeconds = 60;
inline constexpr std::int64_t kAgentOfflineAfterMicros = 3 * kAgentHeartbeatIntervalSeconds *
                                                         kMicrosPerSecond;
// A lease on a machine with a host agent is billed from when the agent reports its workload
// running; not running within this long ([agents] lease_start_timeout_seconds), it ends and the
// hold of its first hour is released (market::Exchange::SetStartTimeout).
inline constexpr std::int64_t kLeaseStartTimeoutMicros = 10 * 60 * kMicrosPerSecond;
// Enrolment tokens are one-time and live a day; an agent whose answer was lost may present its
// token again, with the same nonce, for 10 minutes.
inline constexpr std::int64_t kEnrolmentTokenLifetimeMicros = 24 * kMicrosPerHour;
inline constexpr std::int64_t kEnrolmentRetryMicros = 10 * 60 * kMicrosPerSecond;
inline constexpr std::size_t kMaxOpenEnrolmentTokensPerTarget = 10;
inline constexpr std::size_t kMaxAgentHosts = 100'000;
// What one heartbeat may carry (a 16-GPU machine reports 16; more is a broken or hostile agent).
inline constexpr std::size_t kMaxReportedGpus = 64;
inline constexpr std::size_t kMaxHealthReasonsPerGpu = 8;
inline constexpr std::size_t kMaxReportedWorkloads = 256;
inline constexpr std::size_t kMaxUsageSamplesPerRequest = 1'000;
// Free text from an agent (names, versions, details) is cut to this many bytes.
inline constexpr std::size_t kMaxAgentTextBytes = 256;
// A workload's states kept with their times (WorkloadRecord::steps): pulling, starting, running
// and a few failures or restarts; the oldest beyond this go.
inline constexpr std::size_t kMaxWorkloadStepsKept = 8;
inline constexpr std::size_t kMaxPublicHostBytes = 253;
inline constexpr std::size_t kMaxImageRefBytes = 255;
// A lease's extra container ports (besides sshd's), and the size of its sealed registry credential
// (nonce + MAC + a JSON of user name, token and registry, base64).
inline constexpr std::size_t kMaxExtraPorts = 4;
inline constexpr std::size_t kMaxSealedRegistryAuthBytes = 4096;
// A listing may claim up to MemTotal plus this share: firmware and the kernel keep 2-4% of the
// DIMMs back before MemTotal, and providers list what they installed.
inline constexpr std::int64_t kListedRamSlackPct = 5;
// A usage sample may be at most this old or this far ahead of the server's clock.
inline constexpr std::int64_t kMaxUsageSampleAgeMicros = 24 * kMicrosPerHour;
inline constexpr std::int64_t kMaxUsageSampleAheadMicros = 5 * 60 * kMicrosPerSecond;

// Multi-node quote requests (engine/quote_requests.h): a job larger than one 8-card node, sent to
// the operators for a price. Open ones per account (a customer waiting on more than a few is
// resending the same job), and all kept per account (answered, declined and withdrawn included:
// the record of what was offered). The texts: the customer's contact (a handle, not an email
// requirement) and note, the admin's price and terms, the job and the server's recomputation of
// it (JSON, written by the HTTP layer from fit/quote.h).
inline constexpr std::size_t kMaxOpenQuoteRequestsPerAccount = 3;
inline constexpr std::size_t kMaxQuoteRequestsPerAccount = 100;
inline constexpr std::size_t kMaxQuoteContactBytes = 200;
inline constexpr std::size_t kMaxQuoteNoteBytes = 2000;
inline constexpr std::size_t kMaxQuotePriceBytes = 200;
inline constexpr std::size_t kMaxQuoteTermsBytes = 4000;
inline constexpr std::size_t kMaxQuoteJobBytes = 4 * 1024;
inline constexpr std::size_t kMaxQuoteSizingBytes = 64 * 1024;
inline constexpr std::size_t kMaxQuoteSummaryBytes = 512;
// GET /v1/quote-requests pages.
inline constexpr std::size_t kDefaultQuoteRequestsPageSize = 50;
inline constexpr std::size_t kMaxQuoteRequestsPageSize = 200;

// The audit log (engine/audit_log.h). Events are kept at least this long: the log has no pruning
// today; any pruning added later must keep this many days (a year and a day, so a yearly review
// always finds the whole previous year).
inline constexpr std::int64_t kAuditRetentionDays = 366;
// What one event may carry: its JSON detail (a few ids and names, never a secret) at most this many
// bytes, each detail string cut to kMaxAuditDetailValueBytes, at most kMaxAuditDetailFields
// members; the client's User-Agent cut to kMaxAuditUserAgentBytes (printable ASCII only), the
// actor and address to kMaxAuditShortTextBytes.
inline constexpr std::size_t kMaxAuditDetailBytes = 1024;
inline constexpr std::size_t kMaxAuditDetailValueBytes = 128;
inline constexpr std::size_t kMaxAuditDetailFields = 8;
inline constexpr std::size_t kMaxAuditUserAgentBytes = 256;
inline constexpr std::size_t kMaxAuditShortTextBytes = 64;
// GET /v1/audit-log pages: the default and the largest `limit`.
inline constexpr std::size_t kDefaultAuditPageLimit = 50;
inline constexpr std::size_t kMaxAuditPageLimit = 200;

}  // namespace gpuhub::engine
