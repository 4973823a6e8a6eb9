#include "agent/docker.h"

#include <nlohmann/json.hpp>

#include "agent/limits.h"
#include "core/strings.h"

namespace gpuhub::agent {
namespace {

using json = nlohmann::json;

// The daemon's {"message": "..."} when there is one, else the status.
Status FromResponse(const std::string& what, const net::Response& r) {
  std::string message;
  json body = json::parse(r.body, nullptr, false);
  if (body.is_object() && body.contains("message") && body["message"].is_string()) {
    message = body["message"].get<std::string>();
  } else {
    message = r.body.substr(0, 200);
  }
  std::string text = what + ": Docker answered " + std::to_string(r.status) +
                     (message.empty() ? "" : ": " + message);
  switch (r.status) {
    case 400: return Status::InvalidArgument(text);
    case 404: return Status::NotFound(text);
    case 409: return Status::Conflict(text);
    default: return Status::Unavailable(text);
  }
}

// "1.43" -> 43 (major must be 1); -1 otherwise.
int Minor(const std::string& version) {
  if (version.rfind("1.", 0) != 0) return -1;
  auto n = ParseInt64(version.substr(2), "version");
  return n.ok() ? static_cast<int>(*n) : -1;
}

}  // namespace

std::string QueryEscape(const std::string& value) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

ImageRef SplitImageRef(const std::string& image) {
  if (image.find('@') != std::string::npos) return {image, ""};
  std::size_t slash = image.rfind('/');
  std::size_t colon = image.rfind(':');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    return {image.substr(0, colon), image.substr(colon + 1)};
  }
  return {image, "latest"};
}

DockerClient::DockerClient(std::unique_ptr<net::Client> client, std::string url,
                           std::string version)
    : client_(std::move(client)), url_(std::move(url)), version_(std::move(version)) {}

Result<std::unique_ptr<DockerClient>> DockerClient::Connect(const std::string& url) {
  net::ClientOptions options;
  options.timeout = kDockerTimeout;
  options.max_response_bytes = kMaxDockerResponseBytes;
  options.user_agent = "gpuhub-agent";
  GPUHUB_ASSIGN_OR_RETURN(auto client, net::Client::Open(url, options));
  net::Request ping;
  ping.target = "/_ping";
  auto r = client->Send(ping);
  if (!r.ok()) {
    return Status::Unavailable("the Docker Engine at " + url + " does not answer: " +
                               r.status().message());
  }
  if (r->status != 200) return FromResponse("GET /_ping", *r);
  std::string version = r->HeaderValue("Api-Version").value_or("");
  if (version.empty()) {
    net::Request v;
    v.target = "/version";
    auto answer = client->Send(v);
    if (answer.ok() && answer->status == 200) {
      json body = json::parse(answer->body, nullptr, false);
      if (body.is_object() && body.contains("ApiVersion") && body["ApiVersion"].is_string()) {
        version = body["ApiVersion"].get<std::string>();
      }
    }
  }
  int minor = Minor(version);
  if (minor < kMinDockerApiMinor) {
    return Status::FailedPrecondition(
        "the Docker Engine speaks API " + (version.empty() ? std::string("?") : version) +
        "; the agent needs 1." + std::to_string(kMinDockerApiMinor) +
        " or newer (Docker 20.10+) for GPU device requests");
  }
  minor = std::min(minor, kMaxDockerApiMinor);
  return std::unique_ptr<DockerClient>(
      new DockerClient(std::move(client), url, "1." + std::to_string(minor)));
}

Result<net::Response> DockerClient::Call(const std::string& method, const std::string& target,
                                         const std::string& body) {
  net::Request request;
  if (!body.empty()) {
    request = net::Request::Json(method, "/v" + version_ + target, body);
  } else {
    request.method = method;
    request.target = "/v" + version_ + target;
  }
  auto r = client_->Send(request);
  if (!r.ok()) {
    return Status::Unavailable(method + " " + target + ": the Docker Engine does not answer: " +
                               r.status().message());
  }
  return r;
}

Result<std::vector<ContainerSummary>> DockerClient::ListByLabel(const std::string& label,
                                                                const std::string& value) {
  json filters = {{"label", {label + "=" + value}}};
  GPUHUB_ASSIGN_OR_RETURN(net::Response r,
                          Call("GET", "/containers/json?all=1&filters=" + QueryEscape(filters.dump())));
  if (r.status != 200) return FromResponse("list containers", r);
  json list = json::parse(r.body, nullptr, false);
  if (!list.is_array()) return Status::Unavailable("list containers: not a JSON array");
  std::vector<ContainerSummary> out;
  for (const auto& c : list) {
    if (!c.is_object()) continue;
    ContainerSummary s;
    s.id = c.value("Id", "");
    if (c.contains("Names") && c["Names"].is_array() && !c["Names"].empty() &&
        c["Names"][0].is_string()) {
      s.name = c["Names"][0].get<std::string>();
      if (!s.name.empty() && s.name[0] == '/') s.name.erase(0, 1);
    }
    s.state = c.value("State", "");
    s.status = c.value("Status", "");
    if (c.contains("Labels") && c["Labels"].is_object()) {
      for (const auto& [k, v] : c["Labels"].items()) {
        if (v.is_string()) s.labels[k] = v.get<std::string>();
      }
    }
    if (!s.id.empty()) out.push_back(std::move(s));
  }
  return out;
}

Result<bool> DockerClient::ImagePresent(const std::string& image) {
  GPUHUB_ASSIGN_OR_RETURN(net::Response r, Call("GET", "/images/" + image + "/json"));
  if (r.status == 200) return true;
  if (r.status == 404) return false;
  return FromResponse("inspect image " + image, r);
}

Status DockerClient::EnsureIsolatedNetwork(const std::string& name) {
  GPUHUB_ASSIGN_OR_RETURN(net::Response r, Call("GET", "/networks/" + QueryEscape(name)));
  if (r.status == 200) return Status::Ok();
  if (r.status != 404) return FromResponse("inspect network " + name, r);
  json body = {{"Name", name},
               {"Driver", "bridge"},
               {"CheckDuplicate", true},
               {"Options", {{"com.docker.network.bridge.enable_icc", "false"}}},
               {"Labels", {{"io.gpuhub.managed", "true"}}}};
  GPUHUB_ASSIGN_OR_RETURN(r, Call("POST", "/networks/create", body.dump()));
  if (r.status == 201 || r.status == 409) return Status::Ok();  // 409: made meanwhile
  return FromResponse("create network " + name, r);
}

Status DockerClient::PullImage(const std::string& image) {
  net::ClientOptions options;
  options.timeout = kImagePullTimeout;
  options.max_response_bytes = 64 << 20;  // the progress stream of a big image
  options.user_agent = "gpuhub-agent";
  GPUHUB_ASSIGN_OR_RETURN(auto client, net::Client::Open(url_, options));
  ImageRef ref = SplitImageRef(image);
  net::Request request;
  request.method = "POST";
  request.target = "/v" + version_ + "/images/create?fromImage=" + QueryEscape(ref.from_image) +
                   (ref.tag.empty() ? "" : "&tag=" + QueryEscape(ref.tag));
  auto r = client->Send(request);
  if (!r.ok()) return Status::Unavailable("pull " + image + ": " + r.status().message());
  if (r->status != 200) return FromResponse("pull " + image, *r);
  // The answer is a stream of JSON objects; a failure is one of them ({"error": "..."}).
  for (const auto& line : Split(r->body, '\n')) {
    json event = json::parse(line, nullptr, false);
    if (event.is_object() && event.contains("error") && event["error"].is_string()) {
      return Status::Unavailable("pull " + image + ": " + event["error"].get<std::string>());
    }
  }
  return Status::Ok();
}

Result<std::string> DockerClient::Create(const std::string& name, const std::string& body) {
  GPUHUB_ASSIGN_OR_RETURN(net::Response r,
                          Call("POST", "/containers/create?name=" + QueryEscape(name), body));
  if (r.status != 201) return FromResponse("create container " + name, r);
  json answer = json::parse(r.body, nullptr, false);
  if (!answer.is_object() || !answer.contains("Id") || !answer["Id"].is_string()) {
    return Status::Unavailable("create container " + name + ": no Id in the answer");
  }
  return answer["Id"].get<std::string>();
}

Status DockerClient::Start(const std::string& id) {
  GPUHUB_ASSIGN_OR_RETURN(net::Response r, Call("POST", "/containers/" + id + "/start"));
  if (r.status == 204 || r.status == 304) return Status::Ok();  // 304: already running
  return FromResponse("start container " + id.substr(0, 12), r);
}

Status DockerClient::Stop(const std::string& id, int grace_seconds) {
  GPUHUB_ASSIGN_OR_RETURN(
      net::Response r,
      Call("POST", "/containers/" + id + "/stop?t=" + std::to_string(grace_seconds)));
  if (r.status == 204 || r.status == 304 || r.status == 404) return Status::Ok();
  return FromResponse("stop container " + id.substr(0, 12), r);
}

Status DockerClient::Remove(const std::string& id) {
  GPUHUB_ASSIGN_OR_RETURN(net::Response r,
                          Call("DELETE", "/containers/" + id + "?force=1&v=1"));
  if (r.status == 204 || r.status == 404) return Status::Ok();
  return FromResponse("remove container " + id.substr(0, 12), r);
}

Result<std::vector<std::string>> DockerClient::UnusedVolumes(const std::string& label,
                                                             const std::string& value) {
  json filters = {{"label", {label + "=" + value}}, {"dangling", {"true"}}};
  GPUHUB_ASSIGN_OR_RETURN(net::Response r,
                          Call("GET", "/volumes?filters=" + QueryEscape(filters.dump())));
  if (r.status != 200) return FromResponse("list volumes", r);
  json answer = json::parse(r.body, nullptr, false);
  if (!answer.is_object()) return Status::Unavailable("list volumes: not a JSON object");
  std::vector<std::string> out;
  if (answer.contains("Volumes") && answer["Volumes"].is_array()) {
    for (const auto& v : answer["Volumes"]) {
      if (v.is_object() && v.contains("Name") && v["Name"].is_string()) {
        out.push_back(v["Name"].get<std::string>());
      }
    }
  }
  return out;
}

Status DockerClient::RemoveVolume(const std::string& name) {
  GPUHUB_ASSIGN_OR_RETURN(net::Response r, Call("DELETE", "/volumes/" + QueryEscape(name)));
  if (r.status == 204 || r.status == 404) return Status::Ok();
  return FromResponse("remove volume " + name, r);
}

Result<std::int64_t> DockerClient::NetworkTxBytes(const std::string& id) {
  GPUHUB_ASSIGN_OR_RETURN(net::Response r,
                          Call("GET", "/containers/" + id + "/stats?stream=0&one-shot=1"));
  if (r.status != 200) return FromResponse("stats of " + id.substr(0, 12), r);
  json stats = json::parse(r.body, nullptr, false);
  if (!stats.is_object()) return Status::Unavailable("stats: not a JSON object");
  if (!stats.contains("networks") || !stats["networks"].is_object()) {
    // moby daemon/stats.go: a stopped or restarting container gets an empty StatsJSON (its
    // `networks` omitted). Sending 0 would read as a counter reset and count the next sample
    // again in full.
    return Status::FailedPrecondition(
        "stats of " + id.substr(0, 12) +
        ": no network counters (the container is not running, or has no network)");
  }
  std::int64_t tx = 0;
  for (const auto& [name, n] : stats["networks"].items()) {
    if (n.is_object() && n.contains("tx_bytes") && n["tx_bytes"].is_number_unsigned()) {
      tx += static_cast<std::int64_t>(n["tx_bytes"].get<std::uint64_t>());
    } else if (n.is_object() && n.contains("tx_bytes") && n["tx_bytes"].is_number_integer()) {
      tx += n["tx_bytes"].get<std::int64_t>();
    }
  }
  return tx;
}

}  // namespace gpuhub::agent
