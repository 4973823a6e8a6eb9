// The Docker Engine API over its unix socket (net::Client, "unix:/var/run/docker.sock"): the few
// calls the agent needs. Requests are versioned ("/v1.41/..."): the daemon's API version from
// GET /_ping, at most kMaxDockerApiMinor, at least kMinDockerApiMinor (DeviceRequests).
//
// Errors: unavailable when the daemon cannot be reached or answers 5xx; not_found for 404;
// conflict for 409 (a container name in use; starting a paused, dead or removing container; a
// volume in use); invalid_argument for 400 (a create the daemon refuses, e.g. more CPUs than the
// host has); the daemon's message is kept. Behaviour checked against moby v20.10.24 (Debian's
// docker.io, API 1.41): docs/agent.md "The real Docker engine". Thread-safety: one DockerClient
// per thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "net/http_client.h"

namespace gpuhub::agent {

struct ContainerSummary {
  std::string id;
  std::string name;   // without the leading '/'
  // "created", "running", "restarting", "exited", "paused", "dead", "removing"
  std::string state;
  std::map<std::string, std::string> labels;
  std::string status;  // Docker's words: "Up 2 minutes", "Restarting (1) 3 seconds ago", ...
};

class DockerClient {
 public:
  // Connects and negotiates the API version.
  static Result<std::unique_ptr<DockerClient>> Connect(const std::string& url);

  const std::string& api_version() const { return version_; }  // "1.41" on Debian's 20.10.24

  // Every container (running or not) carrying `label`=`value`.
  Result<std::vector<ContainerSummary>> ListByLabel(const std::string& label,
                                                    const std::string& value);
  Result<bool> ImagePresent(const std::string& image);
  // Creates the bridge network `name` with inter-container communication off, unless it exists.
  Status EnsureIsolatedNetwork(const std::string& name);
  // Pulls the image (POST /images/create): blocks until done, up to kImagePullTimeout, on its own
  // connection. An error reported inside the progress stream is an error.
  Status PullImage(const std::string& image);
  // Creates a container named `name` from the JSON body; its id. conflict when the name is taken.
  Result<std::string> Create(const std::string& name, const std::string& body);
  Status Start(const std::string& id);
  Status Stop(const std::string& id, int grace_seconds);
  // Removes it (forced, with its anonymous volumes: `v=1` leaves named volumes, see
  // RemoveVolume). A missing container is not an error; conflict while Docker is removing it.
  Status Remove(const std::string& id);
  // Named volumes carrying `label`=`value` that no container uses (dangling=true).
  Result<std::vector<std::string>> UnusedVolumes(const std::string& label,
                                                 const std::string& value);
  // Removes a named volume. A missing one is not an error; conflict while a container uses it.
  Status RemoveVolume(const std::string& name);
  // Bytes the container sent over all its networks since it started (GET .../stats, one shot).
  // failed_precondition when the answer has no `networks`: Docker answers an empty sample for a
  // container that is not running (or is restarting), which is no measurement, not a reset.
  Result<std::int64_t> NetworkTxBytes(const std::string& id);

 private:
  DockerClient(std::unique_ptr<net::Client> client, std::string url, std::string version);
  Result<net::Response> Call(const std::string& method, const std::string& target,
                             const std::string& body = "");

  std::unique_ptr<net::Client> client_;
  std::string url_;
  std::string version_;
};

// "repo[:tag]" / "repo@sha256:..." -> the fromImage and tag query of a pull ("latest" when no tag
// and no digest).
struct ImageRef {
  std::string from_image;
  std::string tag;
};
ImageRef SplitImageRef(const std::string& image);
// Percent-encodes a query value (RFC 3986 unreserved characters stay).
std::string QueryEscape(const std::string& value);

}  // namespace gpuhub::agent
