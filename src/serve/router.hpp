// The router: two route tables, the native API's and Zeus's, each naming
// for every method and path template the handler, the largest body and
// whether a token is needed, and for the whole table how its errors name
// fields (the API's own JSON members: "JobConfig::dp_degree" natively,
// "JobInfo::dp_degree" to a Zeus client). Stateless: what differs between
// the two APIs is in their tables, not in flags passed to the handlers.
// Private to the serve part.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api.hpp"
#include "joulepipe/model/error.hpp"

namespace joulepipe::serve {

class Service;

// A route's handler: a member of the service facade (service.hpp). It
// returns the answer, or nullopt after parking `parked`; it throws to refuse
// (ErrorFor maps what it throws to a status).
using Handler = std::optional<Reply> (Service::*)(Request& request, Parked* parked);

struct RouteSpec {
  const char* method;  // "GET"
  const char* path;    // "/jobs/{id}/plan": "{...}" matches one segment, the job id
  Handler handler;
  std::size_t body_limit;  // bytes; 0: the route takes no body
  bool needs_token;        // false only for /healthz
};

struct Api {
  const char* name;  // "native", "zeus"
  std::vector<RouteSpec> routes;
  // The library's field tokens as this API's clients know them.
  model::InputError (*name_fields)(const model::InputError& error);
  std::string (*name_message)(const std::string& message);
};

// The route for a method and decoded path: the first table with the path
// decides; a path no table has is spec == api == nullptr.
RouteMatch RouteOf(const std::string& method, const std::vector<std::string>& segments);

// What the transport checks before reading a body: the most bytes the
// route takes (0 for no route) and whether it needs the token.
std::size_t BodyLimit(const RouteMatch& match);
bool NeedsToken(const RouteMatch& match);
// 405 with the Allow header, when the path is a route of `match.api` but not
// for `method` (match.spec == nullptr, match.api != nullptr).
Reply MethodNotAllowed(const std::string& method, const RouteMatch& match);

// Runs the route's handler on `service`; 404 and 405 for no route; a
// refusal the handler throws becomes its status via ErrorFor.
std::optional<Reply> Dispatch(Service& service, Request& request, Parked* parked,
                              const std::function<void(const std::string&)>& log);

// The one table from the library's error types to HTTP statuses (each
// mapping has a test in tests/serve), with fields named as `api` names
// them: 400 InputError, 422 an InconsistentInputError (a rule between
// fields), 409 a rank conflict or a job in the wrong state,
// HttpError's own status, 500 (logged) for a store failure or a bug.
Reply ErrorFor(std::exception_ptr error, const Api& api,
               const std::function<void(const std::string&)>& log);

// The native API (the routes a joulepipe rank uses, docs/openapi.yaml) and
// Zeus 0.16.0's PFO server routes over the same jobs.
const Api& NativeApi();
const Api& ZeusApi();

}  // namespace joulepipe::serve
