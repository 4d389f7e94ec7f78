#include "joulepipe/model/field_names.hpp"

namespace joulepipe::model {

namespace {

bool IdentifierChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

std::string RenameFields(const std::string& message, FieldNames names) {
  std::string out = message;
  for (const auto& [field, name] : names) {
    std::size_t at = out.find(field);
    while (at != std::string::npos) {
      const std::size_t end = at + field.size();
      const bool whole = (end == out.size() || !IdentifierChar(out[end])) &&
                         (at == 0 || (!IdentifierChar(out[at - 1]) && out[at - 1] != ':'));
      if (whole) {
        out.replace(at, field.size(), name);
        at = out.find(field, at + name.size());
      } else {
        at = out.find(field, end);
      }
    }
  }
  return out;
}

InputError RenameFields(const InputError& error, FieldNames names) {
  return InputError(RenameFields(error.field(), names), RenameFields(error.what(), names));
}

}  // namespace joulepipe::model
