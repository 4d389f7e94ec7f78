# Writes OUTPUT, a C++ source defining joulepipe::cli::EmbeddedDemoProfile()
# that returns the bytes of INPUT. Used for the demo's built-in profile.
file(READ ${INPUT} content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
file(WRITE ${OUTPUT}
"// Generated from ${INPUT} by cmake/embed_text.cmake. Do not edit.\n"
"#include <string_view>\n"
"namespace joulepipe::cli {\n"
"namespace { const char kBytes[] = {${bytes} 0}; }\n"
"std::string_view EmbeddedDemoProfile() { return {kBytes, sizeof(kBytes) - 1}; }\n"
"}  // namespace joulepipe::cli\n")
