// Entry point of the `joulepipe` command; see src/cli/app.cpp.
#include "app.hpp"

int main(int argc, char** argv) {
  return joulepipe::cli::RunApp(argc, argv);
}
