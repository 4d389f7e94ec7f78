// InputError: bad input (a value, a file). The CLI prints it and exits 2; the
// Python package raises it as ValueError.
//
// Messages are written in the library's own terms and never name a front
// end's flag or argument. A value that came from a struct names the field as
// "Struct::member" (e.g. "Spec::chunks", "PlanRequest::p_block_w"); a value
// that came from a file names the file, the 1-based line and the column. Each
// message says what is wrong and how to fix it.
//
// field() is the first field the message is about ("" when the message names
// a file position instead). Front ends rewrite every "Struct::member" token
// they know into their own spelling (the CLI: src/cli/flag_names.cpp), so the
// same error reads "--chunks must be ..." on the command line.
#pragma once

#include <stdexcept>
#include <string>

namespace joulepipe::model {

class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
  InputError(std::string field, const std::string& message)
      : std::runtime_error(message), field_(std::move(field)) {}

  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

// Throws InputError(field, message) unless `ok`: the shape of every range
// check in the library.
inline void Require(bool ok, const char* field, const std::string& message) {
  if (!ok) throw InputError(field, message);
}

// An input whose fields are each in range but break a rule between fields
// (world_size = pp x dp x tp, recover_below <= threshold, a schedule's shape).
// An InputError everywhere (the CLI's exit 2, Python's ValueError); a service
// answers it with 422, not 400, because a schema of each field's type and
// range, such as docs/openapi.yaml, cannot state such a rule.
class InconsistentInputError : public InputError {
 public:
  using InputError::InputError;
};

inline void RequireConsistent(bool ok, const char* field, const std::string& message) {
  if (!ok) throw InconsistentInputError(field, message);
}

// A long task (plan, simulate) was cancelled through its cancel flag. Nothing
// it would have written exists.
class Cancelled : public std::runtime_error {
 public:
  explicit Cancelled(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace joulepipe::model
