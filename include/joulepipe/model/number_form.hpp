// One number form: decimal. A command line or configuration value such as
// 0x10, 0b10, 0o10 or 010 is read by CLI11 and by strtol/strtod-style
// readers as 16, 2 or 8 (and 0x1p-4 as 0.0625), silently; joulepipe refuses
// those forms where it reads a number, so a value means what it says.
// (Files are read with std::from_chars, which knows decimal only; a
// socket mode, written as chmod does, is octal by documented exception.)
#pragma once

#include <string>
#include <string_view>

namespace joulepipe::model {

// What is wrong with `number` (one value, no separators), or "" when it is
// not a hexadecimal, binary, octal or leading-zero form. Words and other
// malformed text return "": the caller's own reader refuses them. E.g.
// "'0x10' is hexadecimal; joulepipe reads numbers in decimal only: write 16".
std::string NonDecimalProblem(std::string_view number);

}  // namespace joulepipe::model
