# Helpers that keep every component's CMakeLists.txt to a few lines.
#
#   gpuhub_library(NAME sizing SOURCES a.cc b.cc DEPS gpuhub_core [EXTERNAL nlohmann_json::nlohmann_json])
#     -> static library gpuhub_<NAME>; DEPS and EXTERNAL are linked PRIVATE, so a component can only
#        include the headers of what it names (the arrows of DESIGN.md), and a wrong include fails.
#   gpuhub_test(NAME sizing_test SOURCES x_test.cc DEPS gpuhub_sizing gpuhub_core)
#     -> GoogleTest executable registered with CTest.

set(GPUHUB_WARNINGS -Wall -Wextra -Werror -Wno-missing-field-initializers)

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
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_compile_options(${ARG_NAME} PRIVATE ${GPUHUB_WARNINGS})
  target_include_directories(${ARG_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_compile_definitions(${ARG_NAME} PRIVATE GPUHUB_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  gtest_discover_tests(${ARG_NAME} DISCOVERY_TIMEOUT 60
                       PROPERTIES ENVIRONMENT "GPUHUB_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endfunction()

function(gpuhub_bench)
  if(NOT GPUHUB_BUILD_BENCH)
    return()
  endif()
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_compile_options(${ARG_NAME} PRIVATE ${GPUHUB_WARNINGS})
  target_include_directories(${ARG_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} benchmark::benchmark)
  target_compile_definitions(${ARG_NAME} PRIVATE GPUHUB_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endfunction()
