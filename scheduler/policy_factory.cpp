// scheduler/policy_factory.cpp — level policies by name, as the CLI and benchmarks spell them.
#include <memory>
#include <string>

#include "kvstream/scheduler.h"

namespace kvstream {

Result<std::unique_ptr<LevelPolicy>> MakeLevelPolicy(const std::string& name, const KvstreamPolicyOptions& options,
                                                     std::shared_ptr<SharedLink> link) {
  if (name == "kvstream") return std::unique_ptr<LevelPolicy>(MakeKvstreamPolicy(options, std::move(link)));
  if (name == "cachegen-rule") {
    CacheGenRuleOptions rule;
    rule.prior_bandwidth_bps = options.prior_bandwidth_bps;
    return MakeCacheGenRulePolicy(rule);
  }
  Level level = 0;
  if (name.rfind("fixed-", 0) == 0 && ParseLevel(name.substr(6), &level)) {
    return std::unique_ptr<LevelPolicy>(std::make_unique<FixedLevelPolicy>(level));
  }
  return Status::InvalidArgument("level policy '" + name +
                                 "' is unknown: expected kvstream, cachegen-rule or fixed-<level> (fixed-L3, "
                                 "fixed-int8, fixed-fp16, fixed-text)");
}

}  // namespace kvstream
