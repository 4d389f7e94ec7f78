#include "state_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace joulepipe::sim_nvml {
namespace {

using nlohmann::json;

json SettingsJson(const Settings& s) {
  json j{{"power_limit_mw", s.power_limit_mw}};
  if (s.locked) j["locked_mhz"] = {s.locked_min_mhz, s.locked_max_mhz};
  if (s.mem_locked) j["mem_locked_mhz"] = {s.mem_locked_min_mhz, s.mem_locked_max_mhz};
  if (s.persistence_mode) j["persistence_mode"] = true;
  if (s.load_state >= 0) j["load"] = {s.load_state, s.load_compute_fraction, s.load_activity};
  return j;
}

Settings SettingsFrom(const json& j) {
  Settings s;
  s.power_limit_mw = j.value("power_limit_mw", 0u);
  if (j.contains("locked_mhz")) {
    s.locked = true;
    s.locked_min_mhz = j["locked_mhz"].at(0).get<unsigned>();
    s.locked_max_mhz = j["locked_mhz"].at(1).get<unsigned>();
  }
  if (j.contains("mem_locked_mhz")) {
    s.mem_locked = true;
    s.mem_locked_min_mhz = j["mem_locked_mhz"].at(0).get<unsigned>();
    s.mem_locked_max_mhz = j["mem_locked_mhz"].at(1).get<unsigned>();
  }
  s.persistence_mode = j.value("persistence_mode", false);
  if (j.contains("load")) {
    s.load_state = j["load"].at(0).get<int>();
    s.load_compute_fraction = j["load"].at(1).get<double>();
    s.load_activity = j["load"].at(2).get<double>();
  }
  return s;
}

std::string Serialise(const DeviceHistories& all) {
  json devices = json::object();
  for (const auto& [uuid, h] : all) {
    json d{{"base", SettingsJson(h.base)}, {"changes", json::array()}};
    if (!std::isnan(h.base_t)) {
      d["base_t"] = h.base_t;
      d["base_energy_j"] = h.base_energy_j;
    }
    for (const SettingsChange& c : h.changes)
      d["changes"].push_back({{"t", c.t}, {"settings", SettingsJson(c.settings)}});
    devices[uuid] = std::move(d);
  }
  return json{{"version", 1}, {"devices", devices}}.dump(1) + "\n";
}

DeviceHistories Parse(const std::string& text, const std::string& path) {
  DeviceHistories all;
  if (text.empty()) return all;
  try {
    const json j = json::parse(text);
    if (j.value("version", 0) != 1) throw std::runtime_error("unsupported version");
    for (const auto& [uuid, d] : j.at("devices").items()) {
      DeviceHistory h;
      h.base = SettingsFrom(d.at("base"));
      if (d.contains("base_t")) {
        h.base_t = d["base_t"].get<double>();
        h.base_energy_j = d.at("base_energy_j").get<double>();
      }
      for (const json& c : d.at("changes"))
        h.changes.push_back({c.at("t").get<double>(), SettingsFrom(c.at("settings"))});
      all[uuid] = std::move(h);
    }
  } catch (const std::exception& e) {
    throw std::runtime_error("sim-nvml state file " + path + " is corrupt: " + e.what());
  }
  return all;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// RAII flock on a file descriptor.
class FileLock {
 public:
  FileLock(const std::string& path, int flags) {
    fd_ = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
    if (fd_ < 0) return;
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

}  // namespace

bool StateStore::Reload() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    if (inode_ == 0 && mtime_ns_ == 0) return false;
    histories_.clear();
    inode_ = 0;
    size_ = 0;
    mtime_ns_ = 0;
    return true;
  }
  const long long mtime =
      static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  if (st.st_ino == inode_ && static_cast<unsigned long long>(st.st_size) == size_ &&
      mtime == mtime_ns_)
    return false;
  histories_ = Parse(ReadAll(path_), path_);
  inode_ = st.st_ino;
  size_ = static_cast<unsigned long long>(st.st_size);
  mtime_ns_ = mtime;
  return true;
}

const DeviceHistories& StateStore::Read() {
  if (!path_.empty()) Reload();
  return histories_;
}

void StateStore::Modify(const std::function<void(DeviceHistories&)>& change) {
  if (path_.empty()) {
    change(histories_);
    return;
  }
  FileLock lock(path_ + ".lock", O_RDWR | O_CREAT);
  if (lock.fd() < 0)
    throw std::runtime_error("sim-nvml: cannot open " + path_ + ".lock: " + std::strerror(errno));
  mtime_ns_ = -1;  // force a re-read under the lock
  Reload();
  change(histories_);
  const std::string tmp = path_ + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << Serialise(histories_);
    out.flush();
    if (!out) throw std::runtime_error("sim-nvml: cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("sim-nvml: cannot replace " + path_ + ": " + std::strerror(errno));
  }
  mtime_ns_ = -1;  // next Read re-parses what we wrote (cheap, and keeps one code path)
}

void AppendCallLog(const std::string& path, const std::string& json_line) {
  if (path.empty()) return;
  FileLock lock(path, O_WRONLY | O_CREAT | O_APPEND);
  if (lock.fd() < 0) return;
  const std::string line = json_line + "\n";
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(lock.fd(), p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace joulepipe::sim_nvml
