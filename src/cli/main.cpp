// Entry point of the `joulepipe` command; see src/cli/app.cpp.
#include "joulepipe/cli/app.hpp"

int main(int argc, char** argv) {
  return joulepipe::cli::RunApp(argc, argv);
}
