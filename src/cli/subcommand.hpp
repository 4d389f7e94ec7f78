// The one shape of every `joulepipe` subcommand.
//
// A subcommand's constructor registers it on the App (name, flags, help);
// after parsing, app.cpp runs the one the user chose. Run() is flag checks
// that only the command line has, one task-level library call and printing:
// the library checks everything else and sequences its own steps.
#pragma once

namespace CLI {
class App;
}

namespace joulepipe::cli {

// Exit codes (app.hpp says when each is used).
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitUsage = 2;

class Subcommand {
 public:
  virtual ~Subcommand() = default;
  Subcommand(const Subcommand&) = delete;
  Subcommand& operator=(const Subcommand&) = delete;

  // Whether the user chose this subcommand; valid after the App parsed.
  bool parsed() const;

  // Runs it and returns the exit code. Throws model::InputError for bad
  // input (app.cpp shows it with flag names and exits kExitUsage); any other
  // exception is an internal error.
  virtual int Run() const = 0;

 protected:
  // `command`: what App::add_subcommand returned for this subcommand.
  explicit Subcommand(CLI::App* command) : command_(command) {}
  CLI::App* command() const { return command_; }

 private:
  CLI::App* command_;
};

}  // namespace joulepipe::cli
