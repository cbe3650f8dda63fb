# cmake -DINPUT=file -DOUTPUT=file.inc -DSYMBOL=name -P EmbedFile.cmake
# Writes `static constexpr const char SYMBOL[] = R"...";` holding INPUT, so
# the compiler carries the host kernel library and writes it into artifacts.
file(READ "${INPUT}" content)
string(FIND "${content}" ")LLMC_EMBED\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter")
endif()
file(WRITE "${OUTPUT}.tmp" "// Generated from ${INPUT} by cmake/EmbedFile.cmake.\n"
  "static constexpr const char ${SYMBOL}[] = R\"LLMC_EMBED(${content})LLMC_EMBED\";\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
