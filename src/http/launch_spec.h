// What a lease or a term rental runs, as an order names it (POST /v1/bids, POST /v1/rentals):
// "image" (a curated name of [agents] images, or any Docker reference), "ports" (extra container
// ports) and "registry_auth" (sealed here, registry_auth.h: the engine never sees it in clear).
#pragma once

#include <string>

#include "core/status.h"
#include "engine/agents.h"
#include "http/api.h"

namespace gpuhub::http {

// The image reference to record: "" when the body names none (the configured default); a curated
// name is replaced by its reference (a name wins over a Docker Hub image of the same name).
// invalid_argument (field "image") for anything else that is not a valid reference.
Result<std::string> ParseLaunchImage(const ApiContext& api, const json& body);

// "ports" ([8888, 8000]; engine::ValidateContainerPorts) and "registry_auth" ({"username",
// "password", "serveraddress"?}; serveraddress defaults to the registry of `image`, else of the
// default image). failed_precondition when the server has no registry key.
Result<engine::LaunchExtras> ParseLaunchExtras(const ApiContext& api, const json& body,
                                               const std::string& image);

// GET /v1/images: {"images": [{"name", "image", "description", "sshd"}], "default"}.
json CuratedImagesJson(const ApiContext& api);

}  // namespace gpuhub::http
