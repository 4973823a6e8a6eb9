# Sizing readers of untrusted files: config.json, safetensors headers, GGUF headers.
gpuhub_fuzz(config_json_fuzz gpuhub_sizing gpuhub_core nlohmann_json::nlohmann_json)
gpuhub_fuzz(safetensors_fuzz gpuhub_sizing gpuhub_core nlohmann_json::nlohmann_json)
gpuhub_fuzz(gguf_fuzz gpuhub_sizing gpuhub_core nlohmann_json::nlohmann_json)
