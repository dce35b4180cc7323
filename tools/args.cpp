// Flag parsing for the kvstream CLI.
#include <cerrno>
#include <cctype>
#include <cstdlib>

#include "tools/command.h"

namespace kvstream::cli {

Result<Args> Args::Parse(const std::vector<std::string>& argv, const std::set<std::string>& flags,
                         const std::set<std::string>& switches) {
  Args args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      std::string name = a.substr(2);
      std::string value = "1";
      const size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      if (!flags.count(name) && !switches.count(name)) {
        return Status::InvalidArgument("unknown flag --" + name + " (see --help)");
      }
      if (eq == std::string::npos && flags.count(name)) {
        if (i + 1 >= argv.size()) return Status::InvalidArgument("flag --" + name + " needs a value");
        value = argv[++i];
      }
      args.flags_[name] = value;
    } else {
      args.positional_.push_back(a);
    }
  }
  return args;
}

std::optional<std::string> Args::Lookup(const std::string& name) const {
  auto it = flags_.find(name);
  if (it != flags_.end()) return it->second;
  std::string env = "KVSTREAM_";
  for (char c : name) env += (c == '-') ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (const char* v = std::getenv(env.c_str())) return std::string(v);
  return std::nullopt;
}

bool Args::Has(const std::string& name) const {
  auto v = Lookup(name);
  return v.has_value() && *v != "0" && *v != "false";
}

std::string Args::GetString(const std::string& name, const std::string& fallback) const {
  return Lookup(name).value_or(fallback);
}

Result<std::string> Args::Require(const std::string& name) const {
  auto v = Lookup(name);
  if (!v || v->empty()) return Status::InvalidArgument("missing required flag --" + name);
  return *v;
}

Result<int64_t> Args::GetInt(const std::string& name, int64_t fallback) const {
  auto v = Lookup(name);
  if (!v) return fallback;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v->c_str(), &end, 10);
  if (errno != 0 || end == v->c_str() || *end != '\0') {
    return Status::InvalidArgument("--" + name + " = '" + *v + "' is not an integer");
  }
  return static_cast<int64_t>(x);
}

Result<double> Args::GetDouble(const std::string& name, double fallback) const {
  auto v = Lookup(name);
  if (!v) return fallback;
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(v->c_str(), &end);
  if (errno != 0 || end == v->c_str() || *end != '\0') {
    return Status::InvalidArgument("--" + name + " = '" + *v + "' is not a number");
  }
  return x;
}

std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> items;
  if (list.empty()) return items;
  for (size_t start = 0;;) {
    const size_t comma = list.find(',', start);
    items.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

std::map<std::string, Command>& MutableCommands() {
  static std::map<std::string, Command> commands;
  return commands;
}

bool RegisterCommand(const Command& command) {
  MutableCommands()[command.name] = command;
  return true;
}

const std::map<std::string, Command>& Commands() { return MutableCommands(); }

}  // namespace kvstream::cli
