# The HTTP server's socket-level read path (request line, headers, chunked bodies, trailers,
# pipelining): the Beast server with a router of test handlers, fed raw bytes over loopback.
# Built from the server's own sources rather than gpuhub_http, which would pull in the engine,
# the stores and every route (minutes of sanitizer builds for code this target never reaches).
add_library(gpuhub_http_server_for_fuzz STATIC
  ${PROJECT_SOURCE_DIR}/src/http/server.cc ${PROJECT_SOURCE_DIR}/src/http/connection.cc
  ${PROJECT_SOURCE_DIR}/src/http/router.cc
  ${PROJECT_SOURCE_DIR}/src/http/static_files.cc ${PROJECT_SOURCE_DIR}/src/engine/metrics.cc)
target_include_directories(gpuhub_http_server_for_fuzz PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(gpuhub_http_server_for_fuzz PUBLIC gpuhub_core Boost::boost spdlog::spdlog
                      fmt::fmt PkgConfig::SODIUM Threads::Threads)
gpuhub_fuzz(http_server_fuzz gpuhub_http_server_for_fuzz)
