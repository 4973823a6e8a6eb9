// The service's configuration: `gpuhub serve --config FILE` (TOML), then flags, then environment
// (GPUHUB_WEBHOOK_SECRET). Every field has a safe default; unknown keys are errors (a typo in a
// security setting must not be silently ignored).
//
//   [server]
//   listen = "127.0.0.1:8080"
//   io_threads = 2
//   max_connections = 1024
//   max_connections_per_address = 256    # 0: no per-address cap (behind a reverse proxy)
//   connections_reserved_for_new_addresses = 64  # default max_connections / 16 (0 behind a proxy)
//   max_header_bytes = 16384
//   max_body_bytes = 1048576
//   header_timeout_seconds = 5           # request line + headers (from accept / first byte)
//   read_timeout_seconds = 15            # the body; idle keep-alive
//   shutdown_grace_seconds = 20
//
//   [auth]
//   argon2_ops_limit = 2                 # libsodium "interactive"
//   argon2_mem_limit_bytes = 67108864    # 64 MiB
//   hash_threads = 2
//   login_free_failures_per_address = 5  # failures of a username from one address before delays
//   login_max_delay_seconds = 900        # the delay doubles per failure (1 s, 2 s, ...) to this
//   login_failures_per_username = 20     # failures of a username from all addresses per window:
//   login_username_window_seconds = 3600 # then one free failure per address (login_throttle.h)
//   login_attempts_per_address = 30      # logins (any outcome) per address per window
//   login_address_window_seconds = 60
//   signups_per_address = 20             # accounts created per address per window
//   signup_address_window_seconds = 3600
//
//   [payments]
//   webhook_secret = "..."               # or GPUHUB_WEBHOOK_SECRET; >= 32 bytes; none: 503
//   btcpay_url = "https://btcpay.example.com"  # or GPUHUB_BTCPAY_URL; none: demo mode
//   store_id = "..."                     # or GPUHUB_BTCPAY_STORE_ID
//   api_key = "..."                      # or GPUHUB_BTCPAY_API_KEY (never logged or shown)
//   btcpay_ca_file = ""                  # https: trust these CAs instead of the system's
//   invoice_expiration_minutes = 60      # BTCPay checkout expiry of a top-up
//   reconcile_interval_seconds = 300     # how often open BTCPay invoices are read back
//   public_url = "https://gpuhub.example.com"  # BTCPay's "return to store" link goes to /account/
//   checkout_base_url = "https://pay.example.com/i/"  # demo mode only
//
//   [market]
//   fee_percent = "10"                   # platform fee per lease-hour, 0..50, up to 4 decimals
//
//   [rentals]
//   provisioning = "immediate"           # or "agent": the host agent reports instances running
//
//   [webhooks]                           # customers' own webhook endpoints (notifications)
//   allow_private_addresses = false      # true only where receivers on loopback/private
//                                        # networks are wanted (tests, a demo on one machine)
//
//   [agents]
//   default_image = "nvidia/cuda:12.4.1-base-ubuntu22.04"   # what a lease runs unless its bid
//                                                          # names an image
//   offline_after_seconds = 45           # a host silent this long is offline (3 heartbeats)
//   registry_key_file = "/var/lib/gpuhub/registry.key"  # seals customers' registry credentials
//                                        # (http/registry_auth.h; default beside a SQLite db)
//   [[agents.images]]                    # the curated list the pages offer (GET /v1/images);
//   name = "pytorch"                     # replaces the built-in list when given
//   image = "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime"
//   description = "PyTorch 2.4 with CUDA 12.4 and cuDNN 9"
//   sshd = false                         # whether the image has sshd (else the first start
//                                        # installs it: slower)
//   lease_start_timeout_seconds = 600    # a lease not running by then ends, nothing charged
//   simulated_hosts = false              # true: machines without an agent trade as if one ran
//                                        # them (demos and tests only; --demo turns it on)
//
//   [storage]                            # network volumes (docs/storage.md "Ceph-backed volumes")
//   ceph_ready_timeout_seconds = 600     # a volume not ready on Ceph by then fails (not charged)
//   [storage.regions.IAD-1]              # a region whose volumes are CephFS subvolumes; a region
//   ceph_conf = "/etc/ceph/ceph.conf"    # without one sells volumes that are billing records
//   ceph_name = "client.admin"           # only, stored nowhere (demo)
//   ceph_keyring = "/etc/ceph/ceph.client.admin.keyring"  # the server's key (0600)
//   cephfs = "vols"                      # the CephFS volume holding the subvolumes
//   monitors = "10.0.0.1:6789,10.0.0.2:6789"  # what the host agents mount from
//
//   [ha]                                 # high availability (docs/operations.md)
//   standby = true                       # another engine writes the database: wait as a standby
//                                        # (false: refuse to start, as a single-node setup wants)
//   advertise_address = "10.0.0.5:8080"  # where other nodes reach this one; default: the listen
//                                        # address (the host name when it listens on 0.0.0.0/::)
//   proxy_threads = 8                    # a standby's requests forwarded to the writer at once
//   proxy_timeout_seconds = 30
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/accounts.h"
#include "engine/state.h"
#include "http/address_filter.h"
#include "http/limits.h"

namespace gpuhub::http {

struct RateLimit {
  std::int64_t count = 0;
  std::int64_t window_seconds = 0;
};

// Login throttling per (username, address), with a per-username budget (http/login_throttle.h).
struct LoginThrottlePolicy {
  std::int64_t free_failures = 5;
  std::int64_t max_delay_seconds = 900;
  std::int64_t failures_per_username = 20;
  std::int64_t window_seconds = 3600;
};

// One image of the curated list ([agents] images): a bid's or rental's "image" may name it.
struct CuratedImage {
  std::string name;  // [a-z0-9-], 1..kMaxCuratedImageNameBytes: what the order names
  std::string image;  // the Docker reference it runs
  std::string description;
  bool sshd = false;  // the image has sshd: the container is reachable sooner
};
// The built-in list (CUDA base, PyTorch, vLLM, Jupyter) when the config names none.
std::vector<CuratedImage> DefaultCuratedImages();
// The curated image called `name`, or null.
const CuratedImage* FindCuratedImage(const std::vector<CuratedImage>& images,
                                     std::string_view name);

// One region's Ceph cluster ([storage.regions.<REGION>]).
struct CephRegionConfig {
  std::string region;  // canonical ("IAD-1")
  std::string ceph_conf;
  std::string ceph_name = "client.admin";
  std::string ceph_keyring;
  std::string cephfs;
  std::string monitors;
};

struct ServiceConfig {
  std::string host = "127.0.0.1";
  int port = 8080;
  int io_threads = 2;
  std::int64_t max_connections = 0;
  // Unlike the other limits, 0 is a setting (no per-address cap), not "the default".
  std::int64_t max_connections_per_address = static_cast<std::int64_t>(kMaxConnectionsPerAddress);
  std::int64_t max_header_bytes = 0;
  std::int64_t max_body_bytes = 0;
  std::int64_t header_timeout_seconds = 0;
  std::int64_t read_timeout_seconds = 0;
  // -1: max_connections / kNewAddressReserveDivisor, or 0 without a per-address cap.
  std::int64_t connections_reserved_for_new_addresses = -1;
  std::int64_t shutdown_grace_seconds = 0;

  engine::PasswordHashing hashing;
  int hash_threads = 2;
  LoginThrottlePolicy login_throttle;
  RateLimit login_attempts_per_address{30, 60};
  RateLimit signups_per_address{20, 3600};

  std::string webhook_secret;
  std::string checkout_base_url = "https://pay.gpuhub.example/i/";
  // BTCPay Server (Greenfield). Empty btcpay_url: demo mode (top-ups settled by a signed
  // InvoiceSettled for our own invoice id, labelled "demo" on the page and in /healthz).
  std::string btcpay_url;
  std::string btcpay_store_id;
  std::string btcpay_api_key;  // secret: never logged, never in an error or /healthz
  std::string btcpay_ca_file;
  std::int64_t invoice_expiration_minutes = 60;
  std::int64_t reconcile_interval_seconds = 300;
  std::string public_url;

  std::int64_t market_fee_ppm = 100'000;  // 10%

  std::string rentals_provisioning = "immediate";  // "immediate" | "agent"
  // Outbound webhook POSTs to loopback, private, link-local or otherwise internal addresses are
  // refused unless this is set (a customer's URL must not reach the platform's own network).
  bool webhooks_allow_private_addresses = false;

  std::vector<CephRegionConfig> storage_ceph_regions;
  std::int64_t storage_ceph_ready_timeout_seconds = 600;  // rentals::kCephReadyTimeoutMicros

  bool standby = true;
  std::string advertise_address;
  int proxy_threads = kProxyThreads;
  int proxy_timeout_seconds = kProxyTimeoutSeconds;
  std::string agents_default_image = "nvidia/cuda:12.4.1-base-ubuntu22.04";
  std::int64_t agents_offline_after_seconds = 45;
  std::vector<CuratedImage> agents_images = DefaultCuratedImages();
  std::string agents_registry_key_file;  // "" = DefaultRegistryKeyPath(the database)
  std::int64_t agents_lease_start_timeout_seconds = 600;  // engine::kLeaseStartTimeoutMicros
  bool agents_simulated_hosts = false;
  // [agents] rental_downtime_multiplier: a term rental's downtime credit per offline hour is its
  // hourly rate (monthly / 720, weekly / 168) x this (ppm; default x1).
  std::int64_t agents_rental_downtime_multiplier_ppm = 1'000'000;
  // [billing]: the seller printed on every tax document (its country decides reverse charge), and
  // the request header a CDN in front of gpuhub puts the client's country in (Cloudflare's
  // "cf-ipcountry", CloudFront's "cloudfront-viewer-country"): recorded as evidence with each
  // purchase. Empty: none is read (a client could send any value without a CDN that overwrites it).
  engine::SellerConfig seller;
  std::string country_header;
  std::string pdf_font;  // the TrueType font of invoice PDFs; "": documents::kDefaultPdfFont
  // [metrics]: GET /metrics is answered to client addresses in `allow` (default loopback only),
  // or to any address that sends `Authorization: Bearer <bearer_token>` when a token is set (at
  // least kMinMetricsTokenBytes). Everyone else gets 403: the counters tell an outsider the
  // platform's volume, its error rates and who is being throttled.
  AddressFilter metrics_allow = DefaultMetricsAllow();
  std::string metrics_bearer_token;  // secret: never logged
  static AddressFilter DefaultMetricsAllow();
};

// Parses the TOML text of a config file; errors name the file, line and key.
Result<ServiceConfig> ParseServiceConfig(std::string_view toml_text, std::string_view source);
Result<ServiceConfig> LoadServiceConfig(const std::string& path);
// A webhook secret: empty (webhooks off) or at least kMinWebhookSecretBytes; invalid_argument
// naming `where` ("GPUHUB_WEBHOOK_SECRET", "gpuhub.toml:12: payments.webhook_secret") otherwise.
Status CheckWebhookSecret(std::string_view secret, std::string_view where);
// "127.0.0.1:8080" -> host, port (0..65535). "[::1]:8080" for IPv6.
Status ParseListen(std::string_view listen, std::string* host, int* port);

}  // namespace gpuhub::http
