#include "http/launch_spec.h"

#include "http/config.h"
#include "http/registry_auth.h"

namespace gpuhub::http {

Result<std::string> ParseLaunchImage(const ApiContext& api, const json& body) {
  GPUHUB_ASSIGN_OR_RETURN(auto image, OptionalString(body, "image"));
  if (!image) return std::string();
  if (const CuratedImage* c = FindCuratedImage(api.config.agents_images, *image)) return c->image;
  GPUHUB_RETURN_IF_ERROR(engine::ValidateImageRef(*image));
  return *image;
}

Result<engine::LaunchExtras> ParseLaunchExtras(const ApiContext& api, const json& body,
                                               const std::string& image) {
  engine::LaunchExtras extras;
  if (auto it = body.find("ports"); it != body.end() && !it->is_null()) {
    auto bad = [] {
      return Status::InvalidArgument("ports must be a list of container ports such as [8888, 8000]")
          .WithField("ports");
    };
    if (!it->is_array()) return bad();
    for (const json& p : *it) {
      if (!p.is_number_integer()) return bad();
      std::int64_t port = p.get<std::int64_t>();
      extras.ports.push_back(port < 0 || port > 65535 ? -1 : static_cast<int>(port));
    }
    GPUHUB_RETURN_IF_ERROR(engine::ValidateContainerPorts(extras.ports));
  }
  if (auto it = body.find("registry_auth"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) {
      return Status::InvalidArgument(
                 "registry_auth must be an object {\"username\", \"password\", \"serveraddress\"?}")
          .WithField("registry_auth");
    }
    for (const auto& [key, value] : it->items()) {
      if (key != "username" && key != "password" && key != "serveraddress") {
        return Status::InvalidArgument("registry_auth." + key + " is not a known field")
            .WithField("registry_auth." + key);
      }
      if (!value.is_string()) {
        return Status::InvalidArgument("registry_auth." + key + " must be a string")
            .WithField("registry_auth." + key);
      }
    }
    RegistryAuth auth;
    auth.username = it->value("username", "");
    auth.password = it->value("password", "");
    auth.server_address = it->value("serveraddress", "");
    if (auth.server_address.empty()) {
      auth.server_address =
          RegistryOfImage(image.empty() ? api.config.agents_default_image : image);
    }
    GPUHUB_RETURN_IF_ERROR(ValidateRegistryAuth(auth));
    if (api.registry_sealer == nullptr) {
      return Status::FailedPrecondition(
                 "this server has no registry key: it cannot keep a registry credential")
          .WithField("registry_auth");
    }
    extras.sealed_registry_auth = api.registry_sealer->Seal(auth);
  }
  return extras;
}

json CuratedImagesJson(const ApiContext& api) {
  json list = json::array();
  for (const auto& c : api.config.agents_images) {
    list.push_back({{"name", c.name},
                    {"image", c.image},
                    {"description", c.description},
                    {"sshd", c.sshd}});
  }
  return {{"images", list}, {"default", api.config.agents_default_image}};
}

}  // namespace gpuhub::http
