// The quantisation schemes' names (kvstream/scheme.h): one table, read both ways.
#include "kvstream/scheme.h"

#include <iterator>
#include <string>

namespace kvstream {
namespace {

struct NamedScheme {
  QuantScheme scheme;
  const char* name;
};
constexpr NamedScheme kSchemes[] = {
    {QuantScheme::kChannelUniform, "channel-uniform"},
    {QuantScheme::kTransform, "transform"},
    {QuantScheme::kPredicted, "predicted"},
};

}  // namespace

const char* SchemeName(QuantScheme scheme) {
  for (const NamedScheme& s : kSchemes) {
    if (s.scheme == scheme) return s.name;
  }
  return "unknown";
}

Result<QuantScheme> ParseQuantScheme(const std::string& name) {
  std::string valid;
  for (const NamedScheme& s : kSchemes) {
    if (name == s.name) return s.scheme;
    if (!valid.empty()) valid += ", ";
    valid += s.name;
  }
  return Status::InvalidArgument("scheme '" + name + "' is not one of " + valid);
}

}  // namespace kvstream
