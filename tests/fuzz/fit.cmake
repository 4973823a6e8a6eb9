# Fit's readers of untrusted input: the JSON bodies of POST /v1/size and /v1/fit, and catalog.toml.
gpuhub_fuzz(fit_request_fuzz gpuhub_fit gpuhub_catalog gpuhub_sizing gpuhub_core
            nlohmann_json::nlohmann_json tomlplusplus::tomlplusplus)
target_compile_definitions(fit_request_fuzz PRIVATE GPUHUB_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
gpuhub_fuzz(catalog_fuzz gpuhub_catalog gpuhub_core tomlplusplus::tomlplusplus)
