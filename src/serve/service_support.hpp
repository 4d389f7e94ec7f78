// Helpers the service's files share (private to the serve part): the
// answers a route builds and query parameters.
#pragma once

#include <charconv>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "api.hpp"
#include "codec.hpp"
#include "joulepipe/coord/job.hpp"
#include "joulepipe/model/error.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/model/json_input.hpp"

namespace joulepipe::serve {

using model::Format;
using model::InputError;
using nlohmann::json;

// An answer other than 400 decided by a route (404, 409, ...).
class HttpError : public std::runtime_error {
 public:
  HttpError(int status, const std::string& message, std::string field = "")
      : std::runtime_error(message), status_(status), field_(std::move(field)) {}
  int status() const { return status_; }
  const std::string& field() const { return field_; }

 private:
  int status_;
  std::string field_;
};

inline constexpr auto kHangUpCheck = std::chrono::seconds(1);

inline Reply JsonReply(int status, const json& body) {
  Reply r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

inline Reply Plain(int status, std::string body) {
  Reply r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

inline Reply Unavailable() {
  Reply r = ErrorReply(503, "the server is stopping; retry in a moment");
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

inline const std::string* QueryValue(const Request& r, const char* key) {
  for (const auto& [k, v] : r.query) {
    if (k == key) return &v;
  }
  return nullptr;
}

// A query parameter that is a whole number in [min, max].
inline std::int64_t QueryInt(const Request& r, const char* key, const std::string& field,
                             std::optional<std::int64_t> fallback, std::int64_t min,
                             std::int64_t max, const std::string& hint) {
  const std::string* v = QueryValue(r, key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    throw InputError(field, Format("%s is missing; %s", field.c_str(), hint.c_str()));
  }
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno == ERANGE || n < min || n > max) {
    throw InputError(field, Format("%s must be a whole number, %lld..%lld (got '%s')",
                                   field.c_str(), static_cast<long long>(min),
                                   static_cast<long long>(max), model::ExcerptText(*v).c_str()));
  }
  return n;
}

inline double QueryNumber(const Request& r, const char* key, const std::string& field,
                          double fallback, double min, double max) {
  const std::string* v = QueryValue(r, key);
  if (v == nullptr) return fallback;
  // Decimal only (std::from_chars): strtod read "0x10" as 16 s.
  double x = 0;
  const auto [end, error] = std::from_chars(v->data(), v->data() + v->size(), x);
  if (v->empty() || error != std::errc() || end != v->data() + v->size() || !std::isfinite(x) ||
      x < min || x > max) {
    throw InputError(field, Format("%s must be a number of seconds, %g..%g (got '%s')",
                                   field.c_str(), min, max, model::ExcerptText(*v).c_str()));
  }
  return x;
}

// The first member where two configs differ, as "JobConfig::<key> (<a> registered,
// <b> given)".
inline std::pair<std::string, std::string> FirstDifference(const protocol::JobConfig& a,
                                                           const protocol::JobConfig& b) {
  const json ja = protocol::JobConfigToJson(a), jb = protocol::JobConfigToJson(b);
  for (const auto& [key, value] : ja.items()) {
    const auto other = jb.find(key);
    const json given = other == jb.end() ? json(nullptr) : *other;
    if (value != given) {
      return {"JobConfig::" + key,
              Format("JobConfig::%s: %s registered, %s given", key.c_str(),
                     model::Excerpt(value).c_str(), model::Excerpt(given).c_str())};
    }
  }
  for (const auto& [key, value] : jb.items()) {
    if (!ja.contains(key)) {
      return {"JobConfig::" + key, Format("JobConfig::%s: unset registered, %s given", key.c_str(),
                                          model::Excerpt(value).c_str())};
    }
  }
  return {"", ""};
}

}  // namespace joulepipe::serve
