// InputError: bad user input (a file, a flag). The message names the file,
// line and field where known and says what to do; the CLI prints it and exits 2.
#pragma once

#include <stdexcept>
#include <string>

namespace joulepipe::model {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace joulepipe::model
