// Parts only depend downwards (docs/architecture.md), and only on the parts
// they declare: CMakeLists.txt's joulepipe_part(<part> <deps>...) lines are
// the arrows, and this test fails when a file of a part (src/<part>,
// include/joulepipe/<part>) includes a header of a part it does not reach
// through them. A link that happens to work (the CLI links every part) is
// not an arrow: issue 57, 3 found `runtime` including the solver it no
// longer used.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace joulepipe::cli {
namespace {

namespace fs = std::filesystem;

// part -> the parts it declares, from CMakeLists.txt.
std::map<std::string, std::set<std::string>> DeclaredArrows(const fs::path& cmake) {
  std::ifstream in(cmake);
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  std::map<std::string, std::set<std::string>> arrows;
  const std::regex call(R"(\njoulepipe_part\(([a-z_]+)([^)]*)\))");
  const std::regex dep(R"(\bjoulepipe_([a-z_]+)\b)");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), call); it != std::sregex_iterator();
       ++it) {
    std::set<std::string>& deps = arrows[(*it)[1].str()];
    const std::string args = (*it)[2].str();
    for (auto d = std::sregex_iterator(args.begin(), args.end(), dep); d != std::sregex_iterator();
         ++d) {
      deps.insert((*d)[1].str());
    }
  }
  return arrows;
}

std::set<std::string> Reach(const std::map<std::string, std::set<std::string>>& arrows,
                            const std::string& part) {
  std::set<std::string> seen;
  std::vector<std::string> todo = {part};
  while (!todo.empty()) {
    const std::string p = todo.back();
    todo.pop_back();
    if (!seen.insert(p).second) continue;
    const auto found = arrows.find(p);
    if (found != arrows.end()) todo.insert(todo.end(), found->second.begin(), found->second.end());
  }
  return seen;
}

TEST(PartArrows, EveryIncludeOfAnotherPartFollowsADeclaredArrow) {
  const fs::path root(JOULEPIPE_SOURCE_DIR);
  auto arrows = DeclaredArrows(root / "CMakeLists.txt");
  // Not a link: gpu declares the simulated NVML library's C extensions
  // (include/joulepipe/sim_nvml) to resolve them with dlsym at run time,
  // as it does NVML's own functions.
  const std::map<std::string, std::string> headers_only = {{"gpu", "sim_nvml"}};
  ASSERT_GE(arrows.size(), 10u) << "CMakeLists.txt's joulepipe_part lines were not found";
  ASSERT_TRUE(arrows.count("runtime") && arrows.count("report") && arrows.count("model"));
  const std::regex include(R"re(^\s*#include "joulepipe/([a-z_]+)/)re");
  std::vector<std::string> wrong;
  int files = 0;
  for (const auto& [part, deps] : arrows) {
    std::set<std::string> reach = Reach(arrows, part);
    const auto extra = headers_only.find(part);
    if (extra != headers_only.end()) reach.insert(extra->second);
    for (const fs::path& dir : {root / "src" / part, root / "include" / "joulepipe" / part}) {
      if (!fs::is_directory(dir)) continue;
      for (const auto& entry : fs::recursive_directory_iterator(dir)) {
        if (!entry.is_regular_file()) continue;
        ++files;
        std::ifstream in(entry.path());
        std::string line;
        std::smatch m;
        for (int n = 1; std::getline(in, line); ++n) {
          if (std::regex_search(line, m, include) && !reach.count(m[1].str())) {
            wrong.push_back(fs::relative(entry.path(), root).string() + ":" + std::to_string(n) +
                            ": " + part + " -> " + m[1].str());
          }
        }
      }
    }
  }
  EXPECT_GT(files, 100);
  std::string list;
  for (const std::string& w : wrong) list += "\n  " + w;
  EXPECT_TRUE(wrong.empty()) << "includes along no arrow of CMakeLists.txt's joulepipe_part "
                                "lines (move the code down, or declare the arrow if it points "
                                "down):"
                             << list;
}

// The arrows the last redesign removed stay removed.
TEST(PartArrows, RuntimeDoesNotReachTheSolver) {
  const auto arrows = DeclaredArrows(fs::path(JOULEPIPE_SOURCE_DIR) / "CMakeLists.txt");
  EXPECT_FALSE(Reach(arrows, "runtime").count("solver"));
}

}  // namespace
}  // namespace joulepipe::cli
