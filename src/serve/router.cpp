#include "router.hpp"

#include <new>
#include <string_view>

#include <nlohmann/json.hpp>

#include "codec.hpp"
#include "joulepipe/coord/job.hpp"
#include "joulepipe/model/format.hpp"
#include "joulepipe/serve/store.hpp"
#include "service.hpp"
#include "service_support.hpp"

namespace joulepipe::serve {

using model::Format;
using model::InputError;
using nlohmann::json;

Reply ErrorReply(int status, const std::string& message, const std::string& field) {
  return JsonReply(status,
                   {{"error", message}, {"field", field.empty() ? json(nullptr) : json(field)}});
}

const Api& NativeApi() {
  static const Api api{
      "native",
      {
          {"GET", "/healthz", &Service::Healthz, 0, false},
          {"GET", "/metrics", &Service::MetricsText, 0, true},
          {"GET", "/jobs", &Service::ListJobs, 0, true},
          {"POST", "/jobs", &Service::CreateJob, kMaxSmallJsonBody, true},
          {"GET", "/jobs/{id}", &Service::GetJob, 0, true},
          {"DELETE", "/jobs/{id}", &Service::DeleteJob, 0, true},
          {"POST", "/jobs/{id}/ranks", &Service::RegisterRank, kMaxSmallJsonBody, true},
          {"PUT", "/jobs/{id}/profile", &Service::PutProfile, kMaxProfileBody, true},
          {"GET", "/jobs/{id}/plan", &Service::GetPlan, 0, true},
          {"POST", "/jobs/{id}/iterations", &Service::ReportIteration, kMaxSmallJsonBody, true},
      },
      [](const InputError& e) { return ForApi(e); },
      [](const std::string& m) { return ForApi(m); },
  };
  return api;
}

const Api& ZeusApi() {
  static const Api api{
      "zeus",
      {
          {"GET", "/info", &Service::ZeusInfo, 0, true},
          {"POST", "/register_job", &Service::ZeusRegisterJob, kMaxSmallJsonBody, true},
          {"POST", "/register_rank/{job_id}", &Service::ZeusRegisterRank, kMaxSmallJsonBody, true},
          {"GET", "/schedule/{job_id}", &Service::ZeusSchedule, 0, true},
          {"POST", "/result/{job_id}", &Service::ZeusResult, kMaxJsonBody, true},
      },
      [](const InputError& e) { return ForZeus(e); },
      [](const std::string& m) { return ForZeus(m); },
  };
  return api;
}

namespace {

// The method as a metrics label: one of HTTP's own, else "OTHER". A label
// never carries what a client typed, so no request adds a series.
const char* MethodLabel(const std::string& method) {
  for (const char* known :
       {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}) {
    if (method == known) return known;
  }
  return "OTHER";
}

// Whether `path` ("/jobs/{id}/plan") has these segments; its "{...}"
// segment's value goes to *job_id.
bool PathMatches(std::string_view path, const std::vector<std::string>& segments,
                 std::string* job_id) {
  std::size_t k = 0;
  std::string id;
  while (!path.empty()) {
    path.remove_prefix(1);  // '/'
    const std::size_t end = path.find('/');
    const std::string_view part = path.substr(0, end);
    path = end == std::string_view::npos ? std::string_view() : path.substr(end);
    if (k >= segments.size()) return false;
    if (!part.empty() && part.front() == '{') {
      id = segments[k];
    } else if (part != segments[k]) {
      return false;
    }
    ++k;
  }
  if (k != segments.size()) return false;
  *job_id = std::move(id);
  return true;
}

}  // namespace

RouteMatch RouteOf(const std::string& method, const std::vector<std::string>& segments) {
  RouteMatch m;
  for (const Api* api : {&NativeApi(), &ZeusApi()}) {
    const char* known = nullptr;  // the path template, when this table has the path
    for (const RouteSpec& route : api->routes) {
      std::string id;
      if (!PathMatches(route.path, segments, &id)) continue;
      known = route.path;
      m.job_id = std::move(id);
      if (method == route.method) {
        m.api = api;
        m.spec = &route;
        m.allowed.clear();
        m.template_name = std::string(route.method) + " " + route.path;
        return m;
      }
      m.allowed += (m.allowed.empty() ? "" : ", ") + std::string(route.method);
    }
    if (known != nullptr) {  // a known path with another method
      m.api = api;
      m.template_name = std::string(MethodLabel(method)) + " " + known;
      return m;
    }
  }
  m.template_name = "unknown";
  return m;
}

std::size_t BodyLimit(const RouteMatch& match) {
  return match.spec != nullptr ? match.spec->body_limit : 0;
}

bool NeedsToken(const RouteMatch& match) {
  return match.spec == nullptr || match.spec->needs_token;
}

Reply MethodNotAllowed(const std::string& method, const RouteMatch& m) {
  Reply reply = ErrorReply(405, Format("%s is not allowed here; this path takes %s",
                                       model::ExcerptText(method, 20).c_str(), m.allowed.c_str()));
  reply.headers.emplace_back("Allow", m.allowed);
  return reply;
}

std::optional<Reply> Dispatch(Service& service, Request& r, Parked* parked,
                              const std::function<void(const std::string&)>& log) {
  const RouteMatch& m = r.match;
  if (m.spec != nullptr) {
    try {
      return (service.*(m.spec->handler))(r, parked);
    } catch (...) {
      return ErrorFor(std::current_exception(), *m.api, log);
    }
  }
  if (m.api != nullptr) return MethodNotAllowed(r.method, m);
  return ErrorReply(404,
                    "no such route; the routes are /healthz, /metrics, /jobs, "
                    "/jobs/{id}, /jobs/{id}/ranks, /jobs/{id}/profile, "
                    "/jobs/{id}/plan, /jobs/{id}/iterations and Zeus's /info, "
                    "/register_job, /register_rank/{id}, /schedule/{id}, "
                    "/result/{id} (docs/coordination.md)");
}

Reply ErrorFor(std::exception_ptr error, const Api& api,
               const std::function<void(const std::string&)>& log) {
  try {
    std::rethrow_exception(error);
  } catch (const HttpError& e) {
    return ErrorReply(e.status(), api.name_message(e.what()), api.name_message(e.field()));
  } catch (const coord::RankConflictError& e) {
    const InputError named = api.name_fields(e);
    return ErrorReply(409, named.what(), named.field());
  } catch (const model::InconsistentInputError& e) {
    const InputError named = api.name_fields(e);
    return ErrorReply(422, named.what(), named.field());
  } catch (const InputError& e) {
    const InputError named = api.name_fields(e);
    return ErrorReply(400, named.what(), named.field());
  } catch (const coord::JobStateError& e) {
    return ErrorReply(409, api.name_message(e.what()));
  } catch (const StoreError& e) {
    log(std::string("error: ") + e.what());
    return ErrorReply(500, std::string(e.what()) + "; nothing was changed");
  } catch (const std::bad_alloc&) {
    return ErrorReply(500, "out of memory while handling the request; nothing was changed");
  } catch (const std::exception& e) {
    log(std::string("error: internal error: ") + e.what());
    return ErrorReply(500, std::string("internal error: ") + e.what());
  } catch (...) {
    log("error: internal error: an exception of unknown type");
    return ErrorReply(500, "internal error");
  }
}

}  // namespace joulepipe::serve
