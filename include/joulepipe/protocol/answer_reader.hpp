// AnswerReader: an answer of the coordinator read field by field, the way a
// rank reads every answer (protocol/json.hpp's RankPlanFromJson, and the
// runtime client's short answers). A failure is a model::InputError whose
// field() is the path in the answer ("instructions[3].frequency") and whose
// message starts with it; the caller adds which route answered.
// Members it is not asked about are ignored (a newer coordinator may add
// some).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/instruction.hpp"
#include "joulepipe/model/json_input.hpp"

namespace joulepipe::protocol {

// Reads an answer field by field; a failure is an InputError whose field is
// the path in the answer and whose message starts with it.
class AnswerReader {
  using json = nlohmann::json;

 public:
  [[noreturn]] void Fail(const std::string& path, const std::string& problem) const {
    throw model::InputError(path, path + " " + problem);
  }

  const json& Object(const json& value, const std::string& path) const {
    if (!value.is_object()) Fail(path, "must be a JSON object, got " + Show(value));
    return value;
  }

  const json& Require(const json& object, const char* key, const std::string& parent) const {
    auto it = object.find(key);
    if (it == object.end()) {
      Fail(parent.empty() ? "the answer" : parent, std::string("has no field '") + key + "'");
    }
    return *it;
  }

  // Absent or null: nullptr.
  const json* Optional(const json& object, const char* key) const {
    auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
  }

  std::int64_t Integer(const json& value, const std::string& path, std::int64_t min,
                       std::int64_t max = std::numeric_limits<int>::max()) const {
    double number = 0;
    if (value.is_number_integer()) {
      number = value.is_number_unsigned() ? static_cast<double>(value.get<std::uint64_t>())
                                          : static_cast<double>(value.get<std::int64_t>());
    } else if (value.is_number_float() && std::isfinite(value.get<double>()) &&
               value.get<double>() == std::floor(value.get<double>())) {
      number = value.get<double>();
    } else {
      Fail(path, "must be an integer, got " + Show(value));
    }
    if (number < static_cast<double>(min) || number > static_cast<double>(max)) {
      Fail(path, "must be an integer >= " + std::to_string(min) + ", got " + Show(value));
    }
    return static_cast<std::int64_t>(number);
  }

  double Finite(const json& value, const std::string& path) const {
    if (!value.is_number() || !std::isfinite(value.get<double>())) {
      Fail(path, "must be a finite number, got " + Show(value));
    }
    return value.get<double>();
  }

  const std::string& String(const json& value, const std::string& path) const {
    if (!value.is_string()) Fail(path, "must be a string, got " + Show(value));
    return value.get_ref<const std::string&>();
  }

  model::Kind KindOf(const json& value, const std::string& path) const {
    model::Kind kind{};
    if (!value.is_string() || !model::ParseKind(value.get_ref<const std::string&>(), &kind)) {
      Fail(path, "must be \"forward\" or \"backward\", got " + Show(value));
    }
    return kind;
  }

 private:
  static std::string Show(const json& value) {
    return value.type_name() + std::string(" ") + model::Excerpt(value, 60);
  }
};

}  // namespace joulepipe::protocol
