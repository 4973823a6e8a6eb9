# Writes a C++ source defining `std::string_view <FUNCTION>()` that returns the text of INPUT, for
# documents the binary serves as they are (docs/openapi.json -> GET /v1/openapi.json).
#   cmake -DINPUT=a.json -DOUTPUT=a.cc -DFUNCTION=gpuhub::http::OpenApiDocument -P embed_text.cmake
# A raw string literal with a delimiter the text must not contain (checked), so the file needs no
# escaping and a diff of the document stays readable in the generated source.
file(READ "${INPUT}" text)
set(delimiter "GPUHUB_EMBED")
string(FIND "${text}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains )${delimiter}\": pick another delimiter")
endif()
string(REGEX MATCH "^(.*)::([^:]+)$" _ "${FUNCTION}")
set(ns "${CMAKE_MATCH_1}")
set(name "${CMAKE_MATCH_2}")
file(WRITE "${OUTPUT}"
     "// Generated from ${INPUT} by cmake/embed_text.cmake: edit that file, not this one.\n"
     "#include <string_view>\n\nnamespace ${ns} {\n"
     "// An array, not a constexpr string_view: the compiler would count its length in a constexpr\n"
     "// loop, which a document of a few hundred KiB exceeds.\n"
     "static constexpr char kText[] = R\"${delimiter}(${text})${delimiter}\";\n"
     "std::string_view ${name}() { return std::string_view(kText, sizeof kText - 1); }\n"
     "}  // namespace ${ns}\n")
