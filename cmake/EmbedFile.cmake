# Writes a C++ source that holds a file's bytes, so that the binary carries data it must never lose
# (an installed gpuhub has no source tree to read data/ from).
#
#   cmake -DINPUT=data/x.txt -DOUTPUT=x_data.cc -DNAMESPACE=gpuhub::engine -DSYMBOL=kX -P EmbedFile.cmake
#
# defines `extern const unsigned char SYMBOL[]` (the bytes, then a NUL that is not counted) and
# `extern const std::size_t SYMBOL##Size` in NAMESPACE. Bytes as hex numbers rather than a string
# literal: no escaping rules, no limit on a literal's length.
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# Line breaks every 32 bytes keep the generated file readable for a compiler error message.
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){32})" "\\1\n" bytes "${bytes}")
get_filename_component(name "${INPUT}" NAME)
file(WRITE "${OUTPUT}"
     "// Generated from ${name} by cmake/EmbedFile.cmake: edit the data file, not this.\n"
     "#include <cstddef>\n"
     "namespace ${NAMESPACE} {\n"
     "extern const unsigned char ${SYMBOL}[];\n"
     "extern const std::size_t ${SYMBOL}Size;\n"
     "const unsigned char ${SYMBOL}[] = {\n${bytes}0x00};\n"
     "const std::size_t ${SYMBOL}Size = ${size};\n"
     "}  // namespace ${NAMESPACE}\n")
