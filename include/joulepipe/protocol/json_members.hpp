// Members: one JSON object of a request body read member by member, the
// reader every message of the coordination protocol uses (protocol/json.hpp,
// and serve's readers of the messages still kept there). Each getter names
// the member as "<what>::<key>" in its model::InputError; with `strict`,
// Done() refuses members no getter asked for, naming them and the known
// ones. Null members count as absent (Python clients send None).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/json_input.hpp"

namespace joulepipe::protocol {

// One JSON object read member by member. Each getter names the member as
// "<what>::<key>"; Done() refuses members no getter asked for (strict).
class Members {
  using json = nlohmann::json;
  using InputError = model::InputError;

 public:
  Members(const json& j, std::string what, bool strict)
      : j_(j), what_(std::move(what)), strict_(strict) {
    if (!j.is_object()) {
      throw InputError(what_, model::Format("the request body must be a JSON object (%s), got %s",
                                            what_.c_str(), model::Excerpt(j).c_str()));
    }
  }

  std::string Field(const char* key) const { return what_ + "::" + key; }

  // The member, or nullptr when absent or null.
  const json* Find(const char* key) {
    seen_.insert(key);
    const auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  const json& Require(const char* key) {
    const json* v = Find(key);
    if (v == nullptr) {
      throw InputError(Field(key),
                       model::Format("%s is missing; it is required", Field(key).c_str()));
    }
    return *v;
  }

  std::int64_t Integer(const json& v, const char* key) const {
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        TooLarge(v, key);
      }
      return static_cast<std::int64_t>(u);
    }
    if (v.is_number_integer()) return v.get<std::int64_t>();
    throw InputError(Field(key), model::Format("%s must be a whole number (got %s)",
                                               Field(key).c_str(), model::Excerpt(v).c_str()));
  }

  int Int(const json& v, const char* key) const {
    const std::int64_t n = Integer(v, key);
    if (n < std::numeric_limits<int>::min() || n > std::numeric_limits<int>::max()) {
      TooLarge(v, key);
    }
    return static_cast<int>(n);
  }

  int Int(const char* key) { return Int(Require(key), key); }
  int Int(const char* key, int fallback) {
    const json* v = Find(key);
    return v == nullptr ? fallback : Int(*v, key);
  }

  double Number(const json& v, const char* key) const {
    if (!v.is_number()) {
      throw InputError(Field(key), model::Format("%s must be a number (got %s)", Field(key).c_str(),
                                                 model::Excerpt(v).c_str()));
    }
    return v.get<double>();
  }

  std::optional<double> OptionalNumber(const char* key) {
    const json* v = Find(key);
    if (v == nullptr) return std::nullopt;
    return Number(*v, key);
  }

  std::string String(const char* key, const std::string& fallback) {
    const json* v = Find(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) {
      throw InputError(Field(key), model::Format("%s must be a string (got %s)", Field(key).c_str(),
                                                 model::Excerpt(*v).c_str()));
    }
    return v->get<std::string>();
  }

  // A list of whole numbers; entry k is named "<key>[k]" in messages.
  std::vector<int> IntList(const char* key, std::size_t max_entries) {
    const json* v = Find(key);
    if (v == nullptr) return {};
    if (!v->is_array()) {
      throw InputError(Field(key), model::Format("%s must be a list of whole numbers (got %s)",
                                                 Field(key).c_str(), model::Excerpt(*v).c_str()));
    }
    if (v->size() > max_entries) {
      throw InputError(Field(key), model::Format("%s lists at most %zu entries (got %zu)",
                                                 Field(key).c_str(), max_entries, v->size()));
    }
    std::vector<int> out;
    out.reserve(v->size());
    for (std::size_t k = 0; k < v->size(); ++k) {
      const json& e = (*v)[k];
      // An unsigned value above INT64_MAX would wrap in get<int64_t>() (2^64-1 -> -1).
      if (!e.is_number_integer() ||
          (e.is_number_unsigned() &&
           e.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) ||
          e.get<std::int64_t>() < std::numeric_limits<int>::min() ||
          e.get<std::int64_t>() > std::numeric_limits<int>::max()) {
        throw InputError(
            Field(key), model::Format("%s[%zu] must be a whole number (got %s)", Field(key).c_str(),
                                      k, model::Excerpt(e).c_str()));
      }
      out.push_back(e.get<int>());
    }
    return out;
  }

  std::vector<double> NumberList(const char* key, std::size_t max_entries) {
    const json& v = Require(key);
    if (!v.is_array()) {
      throw InputError(Field(key), model::Format("%s must be a list of numbers (got %s)",
                                                 Field(key).c_str(), model::Excerpt(v).c_str()));
    }
    if (v.size() > max_entries) {
      throw InputError(Field(key), model::Format("%s lists at most %zu entries (got %zu)",
                                                 Field(key).c_str(), max_entries, v.size()));
    }
    std::vector<double> out;
    out.reserve(v.size());
    for (std::size_t k = 0; k < v.size(); ++k) {
      if (!v[k].is_number()) {
        throw InputError(Field(key),
                         model::Format("%s[%zu] must be a number (got %s)", Field(key).c_str(), k,
                                       model::Excerpt(v[k]).c_str()));
      }
      out.push_back(v[k].get<double>());
    }
    return out;
  }

  void Done() const {
    if (!strict_) return;
    for (const auto& [key, value] : j_.items()) {
      if (seen_.count(key) != 0) continue;
      std::string known;
      for (const std::string& k : seen_) known += (known.empty() ? "" : ", ") + k;
      throw InputError(what_,
                       model::Format("%s has no member \"%s\"; its members are %s", what_.c_str(),
                                     model::ExcerptText(key).c_str(), known.c_str()));
    }
  }

 private:
  [[noreturn]] void TooLarge(const json& v, const char* key) const {
    throw InputError(Field(key), model::Format("%s is out of range (got %s)", Field(key).c_str(),
                                               model::Excerpt(v).c_str()));
  }

  const json& j_;
  std::string what_;
  bool strict_;
  std::set<std::string, std::less<>> seen_;
};

}  // namespace joulepipe::protocol
