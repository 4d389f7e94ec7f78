// Chrome trace-event JSON for simulated timelines (timeline.hpp). Written by
// hand with snprintf: a timeline holds up to a million events, and every
// field is a number or a fixed name, so no escaping is needed beyond labels.
#include "joulepipe/sim/timeline.hpp"

#include <cstdio>
#include <set>
#include <utility>

namespace joulepipe::sim {

namespace {

// Labels come from the caller; keep only characters that need no escaping.
std::string Safe(const std::string& text) {
  std::string out;
  for (char c : text)
    out += (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) ? '_' : c;
  return out;
}

void Append(std::string* out, const char* format, auto... args) {
  char buffer[512];
  const int size = std::snprintf(buffer, sizeof buffer, format, args...);
  if (size > 0)
    out->append(buffer, static_cast<std::size_t>(std::min<int>(size, sizeof buffer - 1)));
}

}  // namespace

const char* EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kInstruction:
      return "instruction";
    case EventKind::kWait:
      return "wait";
    case EventKind::kStall:
      return "stall";
    case EventKind::kAllReduce:
      return "allreduce";
    case EventKind::kCheckpoint:
      return "checkpoint";
    case EventKind::kOffset:
      return "offset";
  }
  return "?";
}

std::string TimelineJson(const schedule::Schedule& schedule,
                         const std::vector<TimelineSection>& sections) {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto separator = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (const TimelineSection& section : sections) {
    if (section.events == nullptr) continue;
    const std::string label = Safe(section.label);
    std::set<std::pair<int, int>> named;  // (pid, tid) already named
    std::set<int> named_pid;
    for (const TimelineEvent& e : *section.events) {
      const int pid = section.pid_offset + e.pipeline;
      if (named_pid.insert(pid).second) {
        separator();
        Append(&out,
               "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,"
               "\"args\":{\"name\":\"%s pipeline %d\"}}",
               pid, label.c_str(), e.pipeline);
        separator();
        Append(&out,
               "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,"
               "\"args\":{\"sort_index\":%d}}",
               pid, pid);
      }
      if (named.insert({pid, e.stage}).second) {
        separator();
        Append(&out,
               "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
               "\"args\":{\"name\":\"stage %d\"}}",
               pid, e.stage, e.stage);
      }
      char name[32];
      if (e.kind == EventKind::kInstruction && e.node >= 0 && e.node < schedule.num_nodes()) {
        const model::Instruction& in = schedule.nodes[e.node];
        const char letter = in.kind == model::Kind::kForward ? 'F' : 'B';
        if (schedule.spec.chunks > 1) {
          std::snprintf(name, sizeof name, "%c%d.%d", letter, in.microbatch, in.chunk);
        } else {
          std::snprintf(name, sizeof name, "%c%d", letter, in.microbatch);
        }
      } else {
        std::snprintf(name, sizeof name, "%s", EventKindName(e.kind));
      }
      separator();
      Append(&out,
             "{\"ph\":\"X\",\"name\":\"%s\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,"
             "\"dur\":%.3f,\"args\":{\"mhz\":%d,\"energy_j\":%.6g,\"iteration\":%d}}",
             name, EventKindName(e.kind), pid, e.stage, e.start_s * 1e6, e.duration_s * 1e6, e.mhz,
             e.energy_j, e.iteration);
    }
  }
  out += "\n]}\n";
  return out;
}

}  // namespace joulepipe::sim
