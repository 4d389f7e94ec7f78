#include "joulepipe/model/number_form.hpp"

#include <cerrno>
#include <cstdlib>

#include "joulepipe/model/json_input.hpp"

namespace joulepipe::model {

std::string NonDecimalProblem(std::string_view number) {
  const bool signed_ = !number.empty() && (number[0] == '+' || number[0] == '-');
  const std::size_t at = signed_ ? 1 : 0;
  if (number.size() < at + 2 || number[at] != '0') return "";
  // Appended, not "'" + text: GCC 12 warns (-Wrestrict) on that form.
  std::string shown = "'";
  shown += ExcerptText(number);
  shown += '\'';
  const char next = number[at + 1];
  const auto spelled = [&](int base, const char* what) {
    // The decimal it stands for, when it is a whole number that fits.
    const std::string digits(number.substr(at + 2));
    errno = 0;
    char* end = nullptr;
    const long long value = std::strtoll(digits.c_str(), &end, base);
    const bool whole = errno == 0 && !digits.empty() && *end == '\0' &&
                       digits.find_first_of("+- ") == std::string::npos;
    return shown + " is " + what + "; joulepipe reads numbers in decimal only" +
           (whole ? ": write " + std::string(number[0] == '-' ? "-" : "") + std::to_string(value)
                  : std::string());
  };
  if (next == 'x' || next == 'X') return spelled(16, "hexadecimal");
  if (next == 'b' || next == 'B') return spelled(2, "binary");
  if (next == 'o' || next == 'O') return spelled(8, "octal");
  if (next >= '0' && next <= '9') {
    return shown +
           " has a leading zero, which some tools read as octal; joulepipe reads numbers in "
           "decimal only: write it without the leading zero";
  }
  return "";
}

}  // namespace joulepipe::model
