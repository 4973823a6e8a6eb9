#include "http/serve.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "engine/accounts.h"
#include "engine/agents.h"
#include "engine/alerts.h"
#include "http/registry_auth.h"
#include "engine/billing.h"
#include "engine/engine.h"
#include "engine/idempotency.h"
#include "engine/market.h"
#include "engine/rentals.h"
#include "engine/storage.h"
#include "engine/wallets.h"
#include "http/api.h"
#include "http/desired_waiters.h"
#include "http/limits.h"
#include "http/log_sink.h"
#include "http/payments_runtime.h"
#include "http/proxy.h"
#include "http/server.h"
#include "http/storage_reconciler.h"
#include "http/webhook_sender.h"
#include "store/read_pool.h"
#include "store/store.h"

#ifdef GPUHUB_HAVE_FIT
#include "catalog/catalog.h"
#include "http/rentals_fleet.h"
#endif

namespace gpuhub::http {
namespace {

// Where the other nodes reach this one: [ha] advertise_address, else the listen address with the
// bound port (the host name when listening on every interface).
std::string AdvertiseAddress(const ServiceConfig& config, int port) {
  if (!config.advertise_address.empty()) return config.advertise_address;
  std::string host = config.host;
  if (host == "0.0.0.0" || host == "::" || host.empty()) {
    char name[256] = {};
    host = ::gethostname(name, sizeof name - 1) == 0 && name[0] ? name : "localhost";
  }
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return host + ":" + std::to_string(port);
}

}  // namespace

namespace {
std::shared_ptr<EventLogSink> event_log;  // the sink SetUpLogging installed
}  // namespace

void SetUpLogging() {
  event_log = std::make_shared<EventLogSink>(stderr, std::chrono::seconds(kLogRepeatWindowSeconds));
  auto logger = std::make_shared<spdlog::logger>("gpuhub", event_log);
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("ts=%Y-%m-%dT%H:%M:%S.%fZ level=%l %v", spdlog::pattern_time_type::utc);
  if (const char* level = std::getenv("GPUHUB_LOG_LEVEL"); level && *level) {
    spdlog::set_level(spdlog::level::from_str(level));
  }
  // Warnings and errors are written at once (the sink writes them itself); request lines within a
  // second: a flush writes the sink's buffer and ends the repeat windows that are over (their
  // summaries appear within a second even when nothing else is logged).
  spdlog::flush_on(spdlog::level::warn);
  spdlog::flush_every(std::chrono::seconds(1));
}

void FlushLogRepeats() {
  if (event_log) event_log->FlushRepeats();
}

int RunServe(const ServeOptions& options) {
  // A client that disconnects must never kill the server with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  ServiceConfig config;
  if (!options.config_path.empty()) {
    auto loaded = LoadServiceConfig(options.config_path);
    if (!loaded.ok()) {
      std::cerr << "gpuhub: " << loaded.status().message() << "\n";
      return 2;
    }
    config = std::move(loaded).value();
  }
  if (!options.listen.empty()) {
    Status s = ParseListen(options.listen, &config.host, &config.port);
    if (!s.ok()) {
      std::cerr << "gpuhub: " << s.message() << "\n";
      return 2;
    }
  }
  for (auto [name, field] : {std::pair<const char*, std::string*>{"GPUHUB_WEBHOOK_SECRET",
                                                                   &config.webhook_secret},
                              {"GPUHUB_BTCPAY_URL", &config.btcpay_url},
                              {"GPUHUB_BTCPAY_STORE_ID", &config.btcpay_store_id},
                              {"GPUHUB_BTCPAY_API_KEY", &config.btcpay_api_key}}) {
    if (const char* value = std::getenv(name); value && *value) *field = value;
  }
  if (const char* secret = std::getenv("GPUHUB_WEBHOOK_SECRET"); secret && *secret) {
    Status s = CheckWebhookSecret(config.webhook_secret, "GPUHUB_WEBHOOK_SECRET");
    if (!s.ok()) {
      std::cerr << "gpuhub: " << s.message() << "\n";
      return 2;
    }
  }
  payments::GreenfieldConfig btcpay{config.btcpay_url, config.btcpay_store_id,
                                    config.btcpay_api_key, config.btcpay_ca_file, 0};
  if (btcpay.configured()) {
    if (Status s = btcpay.Validate(); !s.ok()) {
      std::cerr << "gpuhub: " << s.message() << "\n";
      return 2;
    }
    if (config.webhook_secret.empty()) {
      std::cerr << "gpuhub: with payments.btcpay_url set, payments.webhook_secret (or "
                   "GPUHUB_WEBHOOK_SECRET) must be the secret of the store's webhook\n";
      return 2;
    }
  }
  if (options.clock != "real" && options.clock != "manual") {
    std::cerr << "gpuhub: --clock must be real or manual\n";
    return 2;
  }
  Status hashing = engine::ValidatePasswordHashing(config.hashing);
  if (!hashing.ok()) {
    std::cerr << "gpuhub: " << hashing.message() << "\n";
    return 2;
  }
  SetUpLogging();
  // Customers' registry credentials are sealed with this key (registry_auth.h: lost, only the
  // stored credentials are lost).
  const std::string registry_key = config.agents_registry_key_file.empty()
                                       ? DefaultRegistryKeyPath(options.db)
                                       : config.agents_registry_key_file;
  auto sealer = RegistrySealer::LoadOrCreate(registry_key);
  if (!sealer.ok()) {
    spdlog::error("event=registry_key_unusable path={} error=\"{}\"", registry_key,
                  sealer.status().message());
    std::cerr << "gpuhub: " << sealer.status().message() << "\n";
    return 2;
  }

  auto opened = store::OpenStore(options.db);
  if (!opened.ok()) {
    std::cerr << "gpuhub: " << opened.status().message() << "\n";
    return opened.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::unique_ptr<store::Store> store = std::move(opened).value();
  // Migrate only as the writer: a standby (or a refused engine) must never migrate a database
  // another engine writes. The writer if nobody else writes this database; else a standby (high availability) that
  // forwards the API to the writer and takes over when it goes, or, with [ha] standby = false, an
  // error as a single-node set-up wants.
  auto held = store->TryAcquireWriterLock();
  if (!held.ok()) {  // not "taken": the lock cannot be asked (or, SQLite, not by this path)
    std::cerr << "gpuhub: " << held.status().message() << "\n";
    return 1;
  }
  bool writer = *held;
  for (int waited_ms = 0; !writer && waited_ms < kStartupWriterLockWaitMilliseconds;
       waited_ms += 50) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    held = store->TryAcquireWriterLock();
    if (!held.ok()) {
      std::cerr << "gpuhub: " << held.status().message() << "\n";
      return 1;
    }
    writer = *held;
  }
  if (!writer && !config.standby) {
    Status s = store->AcquireWriterLock();
    writer = s.ok();
    if (!writer) {
      std::cerr << "gpuhub: " << s.message() << "\n";
      return 1;
    }
  }
  if (writer) {
    if (Status s = store->Migrate(); !s.ok()) {
      std::cerr << "gpuhub: " << s.message() << "\n";
      return 1;
    }
  }
  std::string description = store->Describe();

  RealClock real_clock;
  std::unique_ptr<ManualClock> manual_clock;
  const Clock* clock = &real_clock;
  if (options.clock == "manual") {
    // The engine moves it to the database's manual time each time it becomes the writer.
    manual_clock = std::make_unique<ManualClock>(real_clock.NowMicros());
    clock = manual_clock.get();
  }

  engine::MetricsRegistry metrics;
  engine::EngineOptions engine_options;
  engine_options.run_periodic_ticks = !manual_clock;
  engine_options.high_availability = true;
  engine_options.manual_clock = manual_clock.get();
  // The spot exchange trades the catalog's spot cards in the catalog's regions; --demo opens each
  // market with a demo provider asking the catalog's opening price.
  std::vector<engine::DemoOffer> demo_offers;
  std::vector<engine::DemoFleetCard> demo_fleet;
  engine_options.domains.market.fee_ppm = config.market_fee_ppm;
  engine_options.domains.agents->default_image = config.agents_default_image;
  engine_options.domains.agents->offline_after_micros =
      config.agents_offline_after_seconds * kMicrosPerSecond;
  engine_options.domains.agents->rental_downtime_multiplier_ppm =
      config.agents_rental_downtime_multiplier_ppm;
  engine_options.domains.agents->lease_start_timeout_micros =
      config.agents_lease_start_timeout_seconds * kMicrosPerSecond;
  engine_options.domains.agents->simulated_hosts =
      config.agents_simulated_hosts || options.demo || options.simulated_hosts;
  if (engine_options.domains.agents->simulated_hosts) {
    spdlog::warn("event=simulated_hosts machines without an agent trade on a simulated host "
                 "(demo or tests only)");
  }
  engine_options.domains.seller = config.seller;
  // The agents' long-polls, woken by the engine when a host's desired state changes.
  auto desired_waiters = std::make_shared<DesiredWaiters>(kMaxDesiredWaiters);
  engine_options.domains.agents->watch = desired_waiters;
#ifdef GPUHUB_HAVE_FIT
  if (auto fleet = catalog::LoadCatalog(options.data_dir + "/catalog.toml"); fleet.ok()) {
    for (const auto& card : fleet->spot) {
      engine_options.domains.market.gpus.push_back(card.name);
      if (card.opening_ask_micros_per_hour) {
        demo_offers.push_back({card.name, *card.opening_ask_micros_per_hour});
      }
    }
    for (const auto& region : fleet->regions) {
      engine_options.domains.market.regions.push_back(region.code);
    }
    engine_options.domains.rentals = RentalsFleetConfig(*fleet);
    for (const auto& card : fleet->term) demo_fleet.push_back({card.name, card.free_now});
  } else {
    spdlog::warn("event=market_without_catalog error=\"{}\"", fleet.status().ToString());
  }
#endif
  engine_options.domains.rentals.provisioning = config.rentals_provisioning == "agent"
                                                    ? rentals::Provisioning::kAgent
                                                    : rentals::Provisioning::kImmediate;
  // Storage is sold where the fleet rents (its regions).
  engine_options.domains.storage.regions = engine_options.domains.rentals.regions;
  // Regions whose volumes live on Ceph ([storage.regions.<REGION>]); the rest are billing only.
  for (const auto& c : config.storage_ceph_regions) {
    const auto& regions = engine_options.domains.storage.regions;
    if (std::find(regions.begin(), regions.end(), c.region) == regions.end()) {
      std::cerr << "gpuhub: [storage.regions." << c.region
                << "] is not a region where storage is sold\n";
      return 1;
    }
    engine_options.domains.storage.ceph.push_back({c.region, c.monitors});
  }
  engine_options.domains.storage.ceph_ready_timeout_micros =
      config.storage_ceph_ready_timeout_seconds * kMicrosPerSecond;
  engine::Engine engine(std::move(store), *clock, metrics, engine_options);
  engine.AddTickHook(engine::ExpireSessions);
  engine.AddTickHook(engine::ExpireIdempotencyKeys);
  engine::AddTopupTickHooks(engine);
  engine::AddMarketTickHooks(engine);
  engine::AddRentalsTickHooks(engine);
  engine::AddAgentTickHooks(engine);
  engine::AddBillingTickHooks(engine);  // after the market: a month's last hours come first
  engine::AddStorageTickHooks(engine);
  engine::AddAlertHooks(engine);  // last: it looks at what the others changed

  Router router;
  // History reads (closed market records, history pages) on connections of their own: declared
  // before `api` so that the readers stop before it goes.
  store::ReadPool history(options.db);
  ApiContext api(engine, metrics, config);
  api.history = &history;
  api.registry_sealer = sealer->get();
  api.manual_clock = manual_clock.get();
  WriterProxy proxy(config.proxy_threads, kMaxQueuedProxyRequests, config.proxy_timeout_seconds);
  api.proxy = &proxy;
  api.desired_waiters = desired_waiters.get();
  metrics.Gauge("gpuhub_agent_desired_waiters",
                "Agents' long-polls of their desired state parked now (GET /v1/agent/desired).",
                [w = desired_waiters] { return static_cast<double>(w->size()); });
  router.SetWrapper([&api](const std::string& method, const std::string& pattern, Handler h) {
    // On a standby the whole request goes to the writer first, whose router checks the role.
    if (pattern.starts_with("/v1/admin/")) h = AdminOnly(api, std::move(h));
    // An API key on a route closed to keys is refused by whichever node it reaches.
    if (AnsweredByEveryNode(method, pattern)) return ApiKeyGate(method, pattern, std::move(h));
    h = WriterRoute(api, std::move(h));
    // A long-poll forwarded by a standby would hold a proxy thread for its whole wait: the
    // standby asks the writer not to wait (the agent then waits itself between polls).
    if (pattern.starts_with("/v1/agent/desired")) h = NoWaitOnStandby(api, std::move(h));
    return ApiKeyGate(method, pattern, std::move(h));
  });
  PaymentsRuntime payments_runtime(metrics);
  if (btcpay.configured()) {
    payments_runtime.btcpay = std::make_unique<payments::GreenfieldClient>(btcpay);
  }
  api.payments = &payments_runtime;
  RegisterApiRoutes(router, api, options.data_dir);

  // Each connection is a file descriptor: with the common soft limit of 1024, accept() would run
  // out (EMFILE) before max_connections is reached, and new clients would get no answer at all
  // instead of a 503. Raise the soft limit as far as the hard limit allows and say when that is
  // still short.
  if (rlimit files{}; ::getrlimit(RLIMIT_NOFILE, &files) == 0) {
    if (files.rlim_cur < files.rlim_max) {
      files.rlim_cur = files.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &files);
      ::getrlimit(RLIMIT_NOFILE, &files);
    }
    std::size_t connections = config.max_connections > 0
                                  ? static_cast<std::size_t>(config.max_connections)
                                  : kMaxConnections;
    // The host agents' connections come on top (kMaxAgentConnections): a short limit stops the
    // fleet before the customers.
    if (files.rlim_cur != RLIM_INFINITY &&
        files.rlim_cur < connections + kMaxAgentConnections + 64) {
      spdlog::warn("event=open_files_limit_low limit={} max_connections={} agent_connections={}",
                   files.rlim_cur, connections, kMaxAgentConnections);
    }
  }

  ServerOptions server_options;
  server_options.host = config.host;
  server_options.port = config.port;
  server_options.io_threads = config.io_threads;
  server_options.max_connections = static_cast<std::size_t>(config.max_connections);
  server_options.max_connections_per_address =
      static_cast<std::size_t>(config.max_connections_per_address);
  server_options.max_header_bytes = static_cast<std::size_t>(config.max_header_bytes);
  server_options.max_body_bytes = static_cast<std::size_t>(config.max_body_bytes);
  server_options.header_timeout_seconds = static_cast<int>(config.header_timeout_seconds);
  server_options.read_timeout_seconds = static_cast<int>(config.read_timeout_seconds);
  server_options.connections_reserved_for_new_addresses =
      static_cast<std::ptrdiff_t>(config.connections_reserved_for_new_addresses);
  server_options.shutdown_grace_seconds = static_cast<int>(config.shutdown_grace_seconds);
  server_options.web_dir = options.web_dir;
  WebhookSenderOptions sender_options;
  sender_options.allow_private_addresses = config.webhooks_allow_private_addresses;
  WebhookSender webhooks(engine, metrics, sender_options);
  webhooks.Start();
  // Network volumes on Ceph: applied off the writer by the storage reconciler (started once the
  // engine is, stopped before it).
  std::unique_ptr<StorageReconciler> storage_reconciler;
  if (!config.storage_ceph_regions.empty()) {
    storage_reconciler = std::make_unique<StorageReconciler>(
        engine, **sealer, CephClientsOf(config.storage_ceph_regions));
    api.storage_reconciler = storage_reconciler.get();
  }
  auto stop_storage = [&storage_reconciler] {
    if (storage_reconciler) storage_reconciler->Stop();
  };
  Server server(server_options, router, metrics);
  api.draining = [&server] { return server.draining(); };
  desired_waiters->Start(
      engine,
      [&api](engine::Txn& txn, std::int64_t host, const std::string& version) {
        return DesiredChangedAnswer(api, txn, host, version);
      },
      api.draining);
  if (Status s = server.Listen(); !s.ok()) {
    std::cerr << "gpuhub: " << s.message() << "\n";
    webhooks.Stop();
    stop_storage();
    engine.Stop();
    return 1;
  }
  std::string host =
      config.host.find(':') != std::string::npos ? "[" + config.host + "]" : config.host;
  engine.set_advertise_address(AdvertiseAddress(config, server.port()));
  if (writer) {
    if (Status s = engine.Start(); !s.ok()) {
      std::cerr << "gpuhub: cannot load the state from " << description << ": " << s.message()
                << "\n";
      return 1;
    }
    if (options.demo) {
      Status s = engine::SeedDemoData(engine);
      if (!s.ok()) spdlog::warn("event=demo_seed_failed error=\"{}\"", s.ToString());
      s = engine::SeedDemoMarket(engine, demo_offers, engine_options.domains.market.regions);
      if (!s.ok()) spdlog::warn("event=demo_market_seed_failed error=\"{}\"", s.ToString());
      s = engine::SeedDemoFleet(engine, demo_fleet);
      if (!s.ok()) spdlog::warn("event=demo_fleet_seed_failed error=\"{}\"", s.ToString());
      s = engine::SeedDemoStorage(engine);
      if (!s.ok()) spdlog::warn("event=demo_storage_seed_failed error=\"{}\"", s.ToString());
    }
  } else {
    (void)engine.StartStandby();
    spdlog::info("event=standby db={} reason=\"another engine holds the writer lock\"",
                 description);
  }
  spdlog::info(
      "event=listening url=http://{}:{} db={} clock={} webhooks={} payments={} role={} node={}",
      host, server.port(), description, options.clock,
      config.webhook_secret.empty() ? "off" : "on",
      btcpay.configured() ? "btcpay " + btcpay.Describe() : std::string("demo"),
      writer ? "writer" : "standby", engine.node_id());
  // The reconciliation pass runs on the writer only (it skips its passes on a standby).
  StartReconciliation(api, config.reconcile_interval_seconds);
  if (storage_reconciler) storage_reconciler->Start();
  std::cout << "listening on http://" << host << ":" << server.port() << std::endl;
  server.Run([&engine, &payments_runtime, &webhooks, &stop_storage] {
    if (payments_runtime.reconciler) payments_runtime.reconciler->Stop();
    webhooks.Stop();
    stop_storage();
    engine.Stop();
  });
  if (payments_runtime.reconciler) payments_runtime.reconciler->Stop();
  payments_runtime.workers.Stop();
  webhooks.Stop();
  stop_storage();
  engine.Stop();
  desired_waiters->Stop();  // after the engine: no re-read of theirs is in flight any more
  // Password hashes and forwarded requests still queued (only when the shutdown grace ran out)
  // finish now, while the server's I/O objects still exist for their answers to be dropped safely.
  api.hashers.Stop();
  api.renderers.Stop();
  api.history_readers.Stop();
  proxy.Stop();
  spdlog::info("event=exit");
  FlushLogRepeats();
  return 0;
}

}  // namespace gpuhub::http
