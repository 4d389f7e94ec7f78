// Renaming the "Struct::member" tokens of a library message.
//
// Library errors name fields ("Spec::chunks must be ..."). A task call whose
// inputs reach a lower call under other names rewrites the lower call's
// tokens into its own with one small table: `evaluate` names a plan file's
// JSON fields ("num_chunks"), sim::SimulateJob its own request fields. Front
// ends do the same with flags (src/cli/flag_names.cpp).
//
// It lives in `model`, beside InputError, so every part and front end
// renames the same way.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "joulepipe/model/error.hpp"

namespace joulepipe::model {

// Field token -> its name in the caller's terms.
using FieldNames = std::span<const std::pair<std::string_view, std::string_view>>;

// `message` with every whole token of `names` replaced. A token matches only
// where it is not part of a longer identifier or "A::B::c" path, so
// "JobSpec::stall_s" never matches inside "JobSpec::stall_seconds".
std::string RenameFields(const std::string& message, FieldNames names);

// The same error with its message and field() renamed.
InputError RenameFields(const InputError& error, FieldNames names);

}  // namespace joulepipe::model
