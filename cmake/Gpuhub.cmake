# Helpers that keep every component's CMakeLists.txt to a few lines.
#
#   gpuhub_library(NAME sizing SOURCES a.cc b.cc DEPS gpuhub_core [EXTERNAL nlohmann_json::nlohmann_json])
#     -> static library gpuhub_<NAME>; DEPS and EXTERNAL are linked PRIVATE, so a component can only
#        include the headers of what it names (the arrows of DESIGN.md), and a wrong include fails.
#   gpuhub_test(NAME sizing_test SOURCES x_test.cc DEPS gpuhub_sizing gpuhub_core)
#     -> GoogleTest executable registered with CTest.
#   gpuhub_server_test(NAME crash_test SOURCES crash_test.cc TIMEOUT 600 [DEPS gpuhub_engine ...])
#     -> GoogleTest executable, label `integration`, that drives the real `gpuhub` binary through
#        the harness of tests/server.
#   gpuhub_bench(NAME sizing_bench SOURCES x_bench.cc DEPS gpuhub_sizing gpuhub_core)
#     -> Google Benchmark executable.

set(GPUHUB_WARNINGS -Wall -Wextra -Werror -Wno-missing-field-initializers)

# What every executable of the project gets: the warnings, "component/x.h" includes and
# GPUHUB_SOURCE_DIR.
function(gpuhub_executable name)
  add_executable(${name} ${ARGN})
  target_compile_options(${name} PRIVATE ${GPUHUB_WARNINGS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_definitions(${name} PRIVATE GPUHUB_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endfunction()

function(gpuhub_library)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS;EXTERNAL;PUBLIC_EXTERNAL" ${ARGN})
  set(target gpuhub_${ARG_NAME})
  add_library(${target} STATIC ${ARG_SOURCES})
  # Headers are included as "core/money.h", "sizing/model.h": the folder names the component.
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${target} PRIVATE ${GPUHUB_WARNINGS})
  target_link_libraries(${target} PRIVATE ${ARG_DEPS} ${ARG_EXTERNAL})
  if(ARG_PUBLIC_EXTERNAL)
    target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_EXTERNAL})
  endif()
  # Static libraries need their PRIVATE deps at final link time; CMake propagates them as
  # $<LINK_ONLY:...>, which keeps headers out of reach while still linking.
endfunction()

function(gpuhub_test)
  if(NOT GPUHUB_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS" ${ARGN})
  gpuhub_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  gtest_discover_tests(${ARG_NAME} DISCOVERY_TIMEOUT 60
                       PROPERTIES ENVIRONMENT "GPUHUB_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()

function(gpuhub_server_test)
  # RESOURCE_LOCK: a machine-wide name its tests hold while they run (ctest runs no two tests
  # holding the same one at once), for what every copy of the test would share, like /dev/mapper.
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT;RESOURCE_LOCK" "SOURCES;DEPS" ${ARGN})
  gpuhub_executable(${ARG_NAME} ${ARG_SOURCES})
  add_dependencies(${ARG_NAME} gpuhub)
  target_link_libraries(${ARG_NAME} PRIVATE gpuhub_server_harness ${ARG_DEPS} GTest::gtest
                        GTest::gtest_main Threads::Threads)
  set(lock "")
  if(ARG_RESOURCE_LOCK)
    set(lock RESOURCE_LOCK ${ARG_RESOURCE_LOCK})
  endif()
  gtest_discover_tests(${ARG_NAME} DISCOVERY_TIMEOUT 60
                       PROPERTIES LABELS integration TIMEOUT ${ARG_TIMEOUT}
                                  ENVIRONMENT "GPUHUB_SOURCE_DIR=${PROJECT_SOURCE_DIR}" ${lock})
endfunction()

function(gpuhub_bench)
  if(NOT GPUHUB_BUILD_BENCH)
    return()
  endif()
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS" ${ARGN})
  gpuhub_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} benchmark::benchmark)
endfunction()
