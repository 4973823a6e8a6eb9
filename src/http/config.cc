#include "http/config.h"

#include <toml++/toml.h>

#include "billing/profile.h"
#include "core/file.h"
#include "core/money.h"
#include "core/strings.h"
#include "engine/agents.h"
#include "rentals/types.h"

namespace gpuhub::http {

Status ParseListen(std::string_view listen, std::string* host, int* port) {
  std::size_t colon = listen.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return Status::InvalidArgument("--listen must be HOST:PORT (127.0.0.1:8080), got '" +
                                   std::string(listen.substr(0, 64)) + "'");
  }
  std::string_view h = listen.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t p, ParseInt64(listen.substr(colon + 1), "--listen port"));
  if (p < 0 || p > 65535) return Status::InvalidArgument("--listen port must be 0..65535");
  *host = std::string(h);
  *port = static_cast<int>(p);
  return Status::Ok();
}

Status CheckWebhookSecret(std::string_view secret, std::string_view where) {
  if (secret.empty() || secret.size() >= kMinWebhookSecretBytes) return Status::Ok();
  return Status::InvalidArgument(std::string(where) + " is " + std::to_string(secret.size()) +
                                 " bytes; a webhook secret must be at least " +
                                 std::to_string(kMinWebhookSecretBytes) +
                                 " bytes (e.g. `openssl rand -hex 32`)");
}

std::vector<CuratedImage> DefaultCuratedImages() {
  return {{"cuda", "nvidia/cuda:12.4.1-base-ubuntu22.04",
           "CUDA 12.4 base on Ubuntu 22.04: the driver's libraries and nothing else; bring your "
           "own stack",
           false},
          {"pytorch", "pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime",
           "PyTorch 2.4 with CUDA 12.4 and cuDNN 9 (Python, pip, conda)", false},
          {"vllm", "vllm/vllm-openai:v0.6.3",
           "vLLM 0.6 with its OpenAI-compatible server: run `vllm serve MODEL` over SSH and "
           "publish port 8000",
           false},
          {"jupyter", "quay.io/jupyter/pytorch-notebook:cuda12-latest",
           "JupyterLab with PyTorch and CUDA 12: run `jupyter lab --ip 0.0.0.0` over SSH and "
           "publish port 8888",
           false}};
}

const CuratedImage* FindCuratedImage(const std::vector<CuratedImage>& images,
                                     std::string_view name) {
  for (const auto& i : images) {
    if (i.name == name) return &i;
  }
  return nullptr;
}

Result<ServiceConfig> ParseServiceConfig(std::string_view toml_text, std::string_view source) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    return Status::InvalidArgument(std::string(source) + ":" +
                                   std::to_string(e.source().begin.line) + ": " +
                                   std::string(e.description()));
  }
  ServiceConfig config;
  auto where = [&](const toml::node& node, std::string_view key) {
    return std::string(source) + ":" + std::to_string(node.source().begin.line) + ": " +
           std::string(key);
  };
  auto integer = [&](const toml::table& table, std::string_view section, std::string_view key,
                     std::int64_t min, std::int64_t max, std::int64_t* out) -> Status {
    const toml::node* node = table.get(key);
    if (!node) return Status::Ok();
    auto v = node->value<std::int64_t>();
    if (!v || !node->is_integer()) {
      return Status::InvalidArgument(where(*node, std::string(section) + "." + std::string(key)) +
                                     " must be a whole number");
    }
    if (*v < min || *v > max) {
      return Status::InvalidArgument(where(*node, std::string(section) + "." + std::string(key)) +
                                     " must be between " + std::to_string(min) + " and " +
                                     std::to_string(max));
    }
    *out = *v;
    return Status::Ok();
  };
  auto text = [&](const toml::table& table, std::string_view section, std::string_view key,
                  std::string* out) -> Status {
    const toml::node* node = table.get(key);
    if (!node) return Status::Ok();
    if (!node->is_string()) {
      return Status::InvalidArgument(where(*node, std::string(section) + "." + std::string(key)) +
                                     " must be a string");
    }
    *out = *node->value<std::string>();
    return Status::Ok();
  };
  auto known = [&](const toml::table& table, std::string_view section,
                   std::initializer_list<std::string_view> keys) -> Status {
    for (const auto& [key, node] : table) {
      bool ok = false;
      for (auto k : keys) ok = ok || key.str() == k;
      if (!ok) {
        return Status::InvalidArgument(
            where(node, std::string(section) + "." + std::string(key.str())) +
            " is not a known setting");
      }
    }
    return Status::Ok();
  };
  for (const auto& [key, node] : root) {
    if (key.str() != "server" && key.str() != "auth" && key.str() != "payments" &&
        key.str() != "market" && key.str() != "rentals" && key.str() != "webhooks" &&
        key.str() != "agents" && key.str() != "billing" && key.str() != "ha" &&
        key.str() != "metrics" && key.str() != "storage") {
      return Status::InvalidArgument(
          where(node, key.str()) +
          " is not a known section ([server], [auth], [payments], [market], [rentals], "
          "[webhooks], [agents], [billing], [ha], [metrics], [storage])");
    }
    if (!node.is_table())
      return Status::InvalidArgument(where(node, key.str()) + " must be a table");
  }
  if (const toml::table* s = root["server"].as_table()) {
    GPUHUB_RETURN_IF_ERROR(known(
        *s, "server",
        {"listen", "io_threads", "max_connections", "max_connections_per_address",
         "max_header_bytes", "max_body_bytes", "header_timeout_seconds", "read_timeout_seconds",
         "connections_reserved_for_new_addresses", "shutdown_grace_seconds"}));
    std::string listen;
    GPUHUB_RETURN_IF_ERROR(text(*s, "server", "listen", &listen));
    if (!listen.empty()) GPUHUB_RETURN_IF_ERROR(ParseListen(listen, &config.host, &config.port));
    std::int64_t threads = config.io_threads;
    GPUHUB_RETURN_IF_ERROR(integer(*s, "server", "io_threads", 1, 64, &threads));
    config.io_threads = static_cast<int>(threads);
    GPUHUB_RETURN_IF_ERROR(
        integer(*s, "server", "max_connections", 1, 1'000'000, &config.max_connections));
    // 0: no per-address cap (every client behind a reverse proxy has the proxy's address).
    GPUHUB_RETURN_IF_ERROR(integer(*s, "server", "max_connections_per_address", 0, 1'000'000,
                                   &config.max_connections_per_address));
    GPUHUB_RETURN_IF_ERROR(
        integer(*s, "server", "max_header_bytes", 1024, 1 << 20, &config.max_header_bytes));
    GPUHUB_RETURN_IF_ERROR(
        integer(*s, "server", "max_body_bytes", 1024, 64 << 20, &config.max_body_bytes));
    GPUHUB_RETURN_IF_ERROR(
        integer(*s, "server", "header_timeout_seconds", 1, 3600, &config.header_timeout_seconds));
    GPUHUB_RETURN_IF_ERROR(
        integer(*s, "server", "read_timeout_seconds", 1, 3600, &config.read_timeout_seconds));
    GPUHUB_RETURN_IF_ERROR(integer(*s, "server", "connections_reserved_for_new_addresses", 0,
                                   999'999, &config.connections_reserved_for_new_addresses));
    std::int64_t max_connections = config.max_connections > 0
                                       ? config.max_connections
                                       : static_cast<std::int64_t>(kMaxConnections);
    if (config.connections_reserved_for_new_addresses >= max_connections) {
      return Status::InvalidArgument(
          std::string(source) +
          ": server.connections_reserved_for_new_addresses must be below max_connections (" +
          std::to_string(max_connections) + ")");
    }
    // Unset, the header deadline is the shorter of its default and the read timeout.
    std::int64_t read =
        config.read_timeout_seconds > 0 ? config.read_timeout_seconds : kReadTimeoutSeconds;
    if (config.header_timeout_seconds > read) {
      return Status::InvalidArgument(std::string(source) +
                                     ": server.header_timeout_seconds must not exceed "
                                     "read_timeout_seconds (" +
                                     std::to_string(read) + ")");
    }
    GPUHUB_RETURN_IF_ERROR(
        integer(*s, "server", "shutdown_grace_seconds", 1, 3600, &config.shutdown_grace_seconds));
  }
  if (const toml::table* a = root["auth"].as_table()) {
    GPUHUB_RETURN_IF_ERROR(known(*a, "auth",
                                 {"argon2_ops_limit", "argon2_mem_limit_bytes", "hash_threads",
                                  "login_free_failures_per_address", "login_max_delay_seconds",
                                  "login_failures_per_username", "login_username_window_seconds",
                                  "login_attempts_per_address", "login_address_window_seconds",
                                  "signups_per_address", "signup_address_window_seconds"}));
    std::int64_t ops = 0, mem = 0, threads = config.hash_threads;
    GPUHUB_RETURN_IF_ERROR(integer(*a, "auth", "argon2_ops_limit", 1, 1000, &ops));
    GPUHUB_RETURN_IF_ERROR(
        integer(*a, "auth", "argon2_mem_limit_bytes", 8192, std::int64_t{4} << 30, &mem));
    GPUHUB_RETURN_IF_ERROR(integer(*a, "auth", "hash_threads", 1, 64, &threads));
    config.hashing.ops_limit = static_cast<std::uint64_t>(ops);
    config.hashing.mem_limit_bytes = static_cast<std::uint64_t>(mem);
    config.hash_threads = static_cast<int>(threads);
    LoginThrottlePolicy& login = config.login_throttle;
    GPUHUB_RETURN_IF_ERROR(
        integer(*a, "auth", "login_free_failures_per_address", 1, 1'000, &login.free_failures));
    GPUHUB_RETURN_IF_ERROR(
        integer(*a, "auth", "login_max_delay_seconds", 1, 86400, &login.max_delay_seconds));
    GPUHUB_RETURN_IF_ERROR(integer(*a, "auth", "login_failures_per_username", 1, 1'000'000,
                                   &login.failures_per_username));
    GPUHUB_RETURN_IF_ERROR(
        integer(*a, "auth", "login_username_window_seconds", 1, 86400 * 7, &login.window_seconds));
    // A pair is forgotten a window after its last failure: a delay that long would hand an
    // attacker a fresh set of free failures each time it ran out.
    if (login.max_delay_seconds >= login.window_seconds) {
      return Status::InvalidArgument(std::string(source) +
                                     ": auth.login_max_delay_seconds must be shorter than "
                                     "auth.login_username_window_seconds");
    }
    GPUHUB_RETURN_IF_ERROR(integer(*a, "auth", "login_attempts_per_address", 1, 1'000'000,
                                   &config.login_attempts_per_address.count));
    GPUHUB_RETURN_IF_ERROR(integer(*a, "auth", "login_address_window_seconds", 1, 86400 * 7,
                                   &config.login_attempts_per_address.window_seconds));
    GPUHUB_RETURN_IF_ERROR(integer(*a, "auth", "signups_per_address", 1, 1'000'000,
                                   &config.signups_per_address.count));
    GPUHUB_RETURN_IF_ERROR(integer(*a, "auth", "signup_address_window_seconds", 1, 86400 * 7,
                                   &config.signups_per_address.window_seconds));
  }
  if (const toml::table* m = root["market"].as_table()) {
    GPUHUB_RETURN_IF_ERROR(known(*m, "market", {"fee_percent"}));
    if (const toml::node* fee = m->get("fee_percent")) {
      // A percentage with up to 4 decimals ("10", "7.5"), as a string or a whole number.
      std::string value = fee->is_integer() ? std::to_string(*fee->value<std::int64_t>())
                          : fee->is_string() ? *fee->value<std::string>()
                                             : std::string("?");
      auto ppm = ParseDecimalMicros(value, 4);  // percent x 1e6 = ppm x 100
      if (!ppm.ok() || *ppm > 50 * 1'000'000) {
        return Status::InvalidArgument(where(*fee, "market.fee_percent") +
                                       " must be a percentage from 0 to 50 such as \"10\"");
      }
      config.market_fee_ppm = *ppm / 100;
    }
  }
  if (const toml::table* a = root["agents"].as_table()) {
    GPUHUB_RETURN_IF_ERROR(known(*a, "agents", {"default_image", "offline_after_seconds",
                                                "rental_downtime_multiplier", "images",
                                                "registry_key_file",
                                                "lease_start_timeout_seconds",
                                                "simulated_hosts"}));
    GPUHUB_RETURN_IF_ERROR(
        text(*a, "agents", "registry_key_file", &config.agents_registry_key_file));
    if (const toml::node* list = a->get("images")) {
      const toml::array* images = list->as_array();
      if (images == nullptr || images->size() > kMaxCuratedImages) {
        return Status::InvalidArgument(where(*list, "agents.images") + " must be a list of at most " +
                                       std::to_string(kMaxCuratedImages) + " tables");
      }
      config.agents_images.clear();
      for (const toml::node& node : *images) {
        const toml::table* t = node.as_table();
        if (t == nullptr) {
          return Status::InvalidArgument(where(node, "agents.images") +
                                         ": each image is a table {name, image, description, "
                                         "sshd}");
        }
        GPUHUB_RETURN_IF_ERROR(known(*t, "agents.images", {"name", "image", "description", "sshd"}));
        CuratedImage c;
        GPUHUB_RETURN_IF_ERROR(text(*t, "agents.images", "name", &c.name));
        GPUHUB_RETURN_IF_ERROR(text(*t, "agents.images", "image", &c.image));
        GPUHUB_RETURN_IF_ERROR(text(*t, "agents.images", "description", &c.description));
        if (const toml::node* sshd = t->get("sshd")) {
          if (!sshd->is_boolean()) {
            return Status::InvalidArgument(where(*sshd, "agents.images.sshd") +
                                           " must be true or false");
          }
          c.sshd = *sshd->value<bool>();
        }
        bool name_ok = !c.name.empty() && c.name.size() <= kMaxCuratedImageNameBytes;
        for (char ch : c.name) name_ok = name_ok && ((ch >= 'a' && ch <= 'z') ||
                                                     (ch >= '0' && ch <= '9') || ch == '-');
        if (!name_ok || FindCuratedImage(config.agents_images, c.name) != nullptr) {
          return Status::InvalidArgument(where(node, "agents.images.name") +
                                         " must be a distinct name of 1 to " +
                                         std::to_string(kMaxCuratedImageNameBytes) +
                                         " of a-z, 0-9 and '-'");
        }
        if (Status image = engine::ValidateImageRef(c.image); !image.ok()) {
          return Status::InvalidArgument(where(node, "agents.images.image") + ": " +
                                         image.message());
        }
        if (c.description.size() > kMaxCuratedImageDescriptionBytes) {
          return Status::InvalidArgument(where(node, "agents.images.description") +
                                         " is longer than " +
                                         std::to_string(kMaxCuratedImageDescriptionBytes) +
                                         " bytes");
        }
        config.agents_images.push_back(std::move(c));
      }
    }
    GPUHUB_RETURN_IF_ERROR(integer(*a, "agents", "lease_start_timeout_seconds", 60, 86'400,
                                   &config.agents_lease_start_timeout_seconds));
    if (const toml::node* n = a->get("simulated_hosts")) {
      if (!n->is_boolean()) {
        return Status::InvalidArgument(where(*n, "agents.simulated_hosts") +
                                       " must be true or false");
      }
      config.agents_simulated_hosts = *n->value<bool>();
    }
    GPUHUB_RETURN_IF_ERROR(text(*a, "agents", "default_image", &config.agents_default_image));
    if (Status image = engine::ValidateImageRef(config.agents_default_image); !image.ok()) {
      return Status::InvalidArgument(where(*a->get("default_image"), "agents.default_image") +
                                     ": " + image.message());
    }
    GPUHUB_RETURN_IF_ERROR(integer(*a, "agents", "offline_after_seconds", 30, 3600,
                                   &config.agents_offline_after_seconds));
    if (const toml::node* m = a->get("rental_downtime_multiplier")) {
      // A decimal with up to 6 places ("1", "1.5"), as a string or a whole number.
      std::string value = m->is_integer() ? std::to_string(*m->value<std::int64_t>())
                          : m->is_string() ? *m->value<std::string>()
                                           : std::string("?");
      auto ppm = ParseDecimalMicros(value, 6);
      if (!ppm.ok() || *ppm < 0 || *ppm > 10 * 1'000'000) {
        return Status::InvalidArgument(where(*m, "agents.rental_downtime_multiplier") +
                                       " must be a number from 0 to 10 such as \"1\" or \"1.5\"");
      }
      config.agents_rental_downtime_multiplier_ppm = *ppm;
    }
  }
  if (const toml::table* p = root["payments"].as_table()) {
    GPUHUB_RETURN_IF_ERROR(known(*p, "payments",
                                 {"webhook_secret", "checkout_base_url", "btcpay_url", "store_id",
                                  "api_key", "btcpay_ca_file", "invoice_expiration_minutes",
                                  "reconcile_interval_seconds", "public_url"}));
    GPUHUB_RETURN_IF_ERROR(text(*p, "payments", "webhook_secret", &config.webhook_secret));
    if (const toml::node* secret = p->get("webhook_secret")) {
      GPUHUB_RETURN_IF_ERROR(
          CheckWebhookSecret(config.webhook_secret, where(*secret, "payments.webhook_secret")));
    }
    GPUHUB_RETURN_IF_ERROR(text(*p, "payments", "checkout_base_url", &config.checkout_base_url));
    GPUHUB_RETURN_IF_ERROR(text(*p, "payments", "btcpay_url", &config.btcpay_url));
    GPUHUB_RETURN_IF_ERROR(text(*p, "payments", "store_id", &config.btcpay_store_id));
    GPUHUB_RETURN_IF_ERROR(text(*p, "payments", "api_key", &config.btcpay_api_key));
    GPUHUB_RETURN_IF_ERROR(text(*p, "payments", "btcpay_ca_file", &config.btcpay_ca_file));
    GPUHUB_RETURN_IF_ERROR(text(*p, "payments", "public_url", &config.public_url));
    // BTCPay's own bounds: 1 minute .. 30 days of checkout; a pass at most once a second and at
    // least once an hour.
    GPUHUB_RETURN_IF_ERROR(integer(*p, "payments", "invoice_expiration_minutes", 1, 43200,
                                   &config.invoice_expiration_minutes));
    GPUHUB_RETURN_IF_ERROR(integer(*p, "payments", "reconcile_interval_seconds", 1, 3600,
                                   &config.reconcile_interval_seconds));
  }
  if (const toml::table* r = root["rentals"].as_table()) {
    GPUHUB_RETURN_IF_ERROR(known(*r, "rentals", {"provisioning"}));
    GPUHUB_RETURN_IF_ERROR(text(*r, "rentals", "provisioning", &config.rentals_provisioning));
    if (config.rentals_provisioning != "immediate" && config.rentals_provisioning != "agent") {
      return Status::InvalidArgument(where(*r->get("provisioning"), "rentals.provisioning") +
                                     " must be \"immediate\" or \"agent\"");
    }
  }
  if (const toml::table* w = root["webhooks"].as_table()) {
    GPUHUB_RETURN_IF_ERROR(known(*w, "webhooks", {"allow_private_addresses"}));
    if (const toml::node* n = w->get("allow_private_addresses")) {
      if (!n->is_boolean()) {
        return Status::InvalidArgument(where(*n, "webhooks.allow_private_addresses") +
                                       " must be true or false");
      }
      config.webhooks_allow_private_addresses = *n->value<bool>();
    }
  }
  if (const toml::table* b = root["billing"].as_table()) {
    GPUHUB_RETURN_IF_ERROR(known(*b, "billing",
                                 {"seller_name", "seller_address", "seller_country",
                                  "seller_vat_id", "country_header", "pdf_font"}));
    engine::SellerConfig& seller = config.seller;
    GPUHUB_RETURN_IF_ERROR(text(*b, "billing", "seller_name", &seller.name));
    GPUHUB_RETURN_IF_ERROR(text(*b, "billing", "seller_address", &seller.address));
    GPUHUB_RETURN_IF_ERROR(text(*b, "billing", "seller_country", &seller.country));
    GPUHUB_RETURN_IF_ERROR(text(*b, "billing", "seller_vat_id", &seller.vat_id));
    GPUHUB_RETURN_IF_ERROR(text(*b, "billing", "country_header", &config.country_header));
    GPUHUB_RETURN_IF_ERROR(text(*b, "billing", "pdf_font", &config.pdf_font));
    config.country_header = ToLower(config.country_header);
    // The seller is checked like a business buyer: the same country codes and VAT id shapes.
    auto checked = billing::ValidateProfile(
        {seller.country, seller.name.empty() ? "?" : seller.name, seller.vat_id, seller.address});
    if (!checked.ok() || seller.name.empty()) {
      return Status::InvalidArgument(
          std::string(source) + ": [billing] seller_* must name the seller (seller_name), its " +
          "country (an ISO code such as US or DE) and a VAT id of that country's shape when " +
          "given: " + (checked.ok() ? std::string("seller_name is empty") : checked.status().message()));
    }
    seller.country = checked->country;
    seller.vat_id = checked->vat_id;
  }
  if (const toml::table* m = root["metrics"].as_table()) {
    GPUHUB_RETURN_IF_ERROR(known(*m, "metrics", {"allow", "bearer_token"}));
    if (const toml::node* n = m->get("allow")) {
      std::vector<std::string> networks;
      const toml::array* list = n->as_array();
      if (list) {
        for (const auto& item : *list) {
          if (!item.is_string()) {
            list = nullptr;
            break;
          }
          networks.push_back(*item.value<std::string>());
        }
      }
      if (!list) {
        return Status::InvalidArgument(where(*n, "metrics.allow") +
                                       " must be a list of networks such as [\"127.0.0.0/8\"]");
      }
      auto filter = AddressFilter::Parse(networks);
      if (!filter.ok()) {
        return Status::InvalidArgument(where(*n, "metrics.allow") + ": " +
                                       filter.status().message());
      }
      config.metrics_allow = std::move(filter).value();
    }
    GPUHUB_RETURN_IF_ERROR(text(*m, "metrics", "bearer_token", &config.metrics_bearer_token));
    if (!config.metrics_bearer_token.empty() &&
        config.metrics_bearer_token.size() < kMinMetricsTokenBytes) {
      return Status::InvalidArgument(
          where(*m->get("bearer_token"), "metrics.bearer_token") + " is " +
          std::to_string(config.metrics_bearer_token.size()) + " bytes; it must be at least " +
          std::to_string(kMinMetricsTokenBytes) + " (e.g. `openssl rand -hex 32`)");
    }
  }
  if (const toml::table* st = root["storage"].as_table()) {
    GPUHUB_RETURN_IF_ERROR(known(*st, "storage", {"ceph_ready_timeout_seconds", "regions"}));
    GPUHUB_RETURN_IF_ERROR(integer(*st, "storage", "ceph_ready_timeout_seconds", 10, 86'400,
                                   &config.storage_ceph_ready_timeout_seconds));
    if (const toml::node* regions = st->get("regions")) {
      const toml::table* t = regions->as_table();
      if (t == nullptr) {
        return Status::InvalidArgument(where(*regions, "storage.regions") +
                                       " must be tables [storage.regions.<REGION>]");
      }
      for (const auto& [key, node] : *t) {
        const std::string section = "storage.regions." + std::string(key.str());
        const toml::table* r = node.as_table();
        auto code = rentals::CanonicalRegion(key.str());
        if (r == nullptr || !code.ok()) {
          return Status::InvalidArgument(where(node, section) +
                                         " must be a table named by a region code (IAD-1)");
        }
        GPUHUB_RETURN_IF_ERROR(known(*r, section, {"ceph_conf", "ceph_name", "ceph_keyring",
                                                   "cephfs", "monitors"}));
        CephRegionConfig c;
        c.region = *code;
        GPUHUB_RETURN_IF_ERROR(text(*r, section, "ceph_conf", &c.ceph_conf));
        GPUHUB_RETURN_IF_ERROR(text(*r, section, "ceph_name", &c.ceph_name));
        GPUHUB_RETURN_IF_ERROR(text(*r, section, "ceph_keyring", &c.ceph_keyring));
        GPUHUB_RETURN_IF_ERROR(text(*r, section, "cephfs", &c.cephfs));
        GPUHUB_RETURN_IF_ERROR(text(*r, section, "monitors", &c.monitors));
        for (auto [k, v] : {std::pair{"ceph_conf", &c.ceph_conf}, {"ceph_name", &c.ceph_name},
                            {"ceph_keyring", &c.ceph_keyring}, {"cephfs", &c.cephfs},
                            {"monitors", &c.monitors}}) {
          if (v->empty() || v->size() > kMaxCephSettingBytes) {
            return Status::InvalidArgument(where(node, section + "." + k) + " must be set (1.." +
                                           std::to_string(kMaxCephSettingBytes) + " bytes)");
          }
        }
        for (const auto& other : config.storage_ceph_regions) {
          if (other.region == c.region) {
            return Status::InvalidArgument(where(node, section) + " is given twice");
          }
        }
        config.storage_ceph_regions.push_back(std::move(c));
      }
    }
  }
  if (const toml::table* h = root["ha"].as_table()) {
    GPUHUB_RETURN_IF_ERROR(known(
        *h, "ha", {"standby", "advertise_address", "proxy_threads", "proxy_timeout_seconds"}));
    if (const toml::node* standby = h->get("standby")) {
      if (!standby->is_boolean()) {
        return Status::InvalidArgument(where(*standby, "ha.standby") + " must be true or false");
      }
      config.standby = *standby->value<bool>();
    }
    GPUHUB_RETURN_IF_ERROR(text(*h, "ha", "advertise_address", &config.advertise_address));
    if (!config.advertise_address.empty()) {
      std::string host;
      int port = 0;
      Status s = ParseListen(config.advertise_address, &host, &port);
      if (!s.ok() || port == 0 || host == "0.0.0.0" || host == "::") {
        return Status::InvalidArgument(
            where(*h->get("advertise_address"), "ha.advertise_address") +
            " must be HOST:PORT that other nodes can reach (not a wildcard, not port 0)");
      }
    }
    std::int64_t threads = config.proxy_threads, timeout = config.proxy_timeout_seconds;
    GPUHUB_RETURN_IF_ERROR(integer(*h, "ha", "proxy_threads", 1, 256, &threads));
    GPUHUB_RETURN_IF_ERROR(integer(*h, "ha", "proxy_timeout_seconds", 1, 600, &timeout));
    config.proxy_threads = static_cast<int>(threads);
    config.proxy_timeout_seconds = static_cast<int>(timeout);
  }
  return config;
}

AddressFilter ServiceConfig::DefaultMetricsAllow() {
  return AddressFilter::Parse({"127.0.0.0/8", "::1/128"}).value();
}

Result<ServiceConfig> LoadServiceConfig(const std::string& path) {
  GPUHUB_ASSIGN_OR_RETURN(std::string text, ReadFile(path, 1 << 20));
  return ParseServiceConfig(text, path);
}

}  // namespace gpuhub::http
