// Issue 57, 4: messages below the front ends name library fields
// ("PlanReportInputs::profile"), never a command's flags ("--profile"): the
// CLI renames fields to its flags (cli::WithFlagNames) and Python to its
// keywords, so one message serves every front end. This test fails when a
// string literal in a part below them names a flag.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace joulepipe::cli {
namespace {

namespace fs = std::filesystem;

TEST(NoFlagsBelowTheCli, NoStringLiteralBelowTheFrontEndsNamesAFlag) {
  const fs::path src = fs::path(JOULEPIPE_SOURCE_DIR) / "src";
  // The front ends: they speak in their own words.
  const std::vector<std::string> front_ends = {"cli", "daemon_main", "python"};
  const std::regex flag(R"re("(?:[^"\\\n]|\\.)*\s--[a-z][a-z0-9-]+(?:[^"\\\n]|\\.)*")re");
  const std::regex leading(R"re("--[a-z][a-z0-9-]+)re");
  std::vector<std::string> found;
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    const fs::path rel = fs::relative(entry.path(), src);
    const std::string part = rel.begin()->string();
    if (std::find(front_ends.begin(), front_ends.end(), part) != front_ends.end()) continue;
    const std::string ext = entry.path().extension().string();
    if (ext != ".cpp" && ext != ".hpp") continue;
    ++files;
    std::ifstream in(entry.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      const std::size_t comment = line.find("//");
      const std::string code = comment == std::string::npos ? line : line.substr(0, comment);
      if (std::regex_search(code, flag) || std::regex_search(code, leading)) {
        found.push_back(rel.string() + ":" + std::to_string(n) + ": " + line);
      }
    }
  }
  EXPECT_GT(files, 100);  // the tree was found
  std::string list;
  for (const std::string& f : found) list += "\n  " + f;
  EXPECT_TRUE(found.empty()) << "messages below the front ends that name flags (name the "
                                "library field, and map it in src/cli/flag_names.cpp):"
                             << list;
}

}  // namespace
}  // namespace joulepipe::cli
