// The `kvstream` command line: a registry of subcommands and the one place where flags and KVSTREAM_*
// environment variables are read.
//
// Each subcommand lives in its own tools/cmd_*.cpp and registers itself with KVSTREAM_REGISTER_COMMAND.
// A command name may have two words ("kv dump", "bench codec"); the longest registered prefix of the
// arguments wins.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kvstream/status.h"

namespace kvstream::cli {

// Parsed "--name value", "--name=value" and bare "--switch" flags. Every Get* first looks at the flag,
// then at the environment variable KVSTREAM_<NAME> (upper case, '-' -> '_'), then returns the default.
class Args {
 public:
  // `flags` take a value, `switches` take none; any other --name is an error, so a typo never passes as a
  // no-op.
  static Result<Args> Parse(const std::vector<std::string>& argv, const std::set<std::string>& flags,
                            const std::set<std::string>& switches);

  bool Has(const std::string& name) const;
  std::string GetString(const std::string& name, const std::string& fallback = "") const;
  Result<std::string> Require(const std::string& name) const;
  Result<int64_t> GetInt(const std::string& name, int64_t fallback) const;
  Result<double> GetDouble(const std::string& name, double fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::optional<std::string> Lookup(const std::string& name) const;
  std::map<std::string, std::string> flags_;
  std::vector<std::string> positional_;
};

// The items of a comma-separated flag value ("a,b"), empty ones included so that the caller can refuse
// "a,,b" or "a,"; none for an empty value.
std::vector<std::string> SplitList(const std::string& list);

struct Command {
  std::string name;     // "eval", "kv dump"
  std::string summary;  // one line for `kvstream --help`
  std::string help;     // usage and every flag with its default, for `kvstream NAME --help`
  std::set<std::string> flags;     // flags that take a value
  std::set<std::string> switches;  // flags that take none
  // Prints its own output; a failure is returned as a Status, which main prints.
  Status (*run)(const Args& args);
};

bool RegisterCommand(const Command& command);
const std::map<std::string, Command>& Commands();

}  // namespace kvstream::cli

#define KVSTREAM_REGISTER_COMMAND(var, ...) \
  static const bool var##_registered = ::kvstream::cli::RegisterCommand(::kvstream::cli::Command __VA_ARGS__)
