// The KV transformations the CLI's eval and demo (and later the Python package) measure, by name:
// "fp16" (the uncompressed baseline, first), "int8", and "kvstream-L<n>" for each lossy level of the
// codec, each a KvCodec built for a KvCodecChoice.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kvstream/profile.h"
#include "kvstream/status.h"
#include "measure/kvstream_codec.h"

namespace kvstream {

// How the kvstream-L<n> methods code: each chunk with its own tables (no profile), or against a profile in
// its scheme, with fine rows for the transform and predicted schemes.
struct KvCodecChoice {
  std::shared_ptr<const Profile> profile;
  QuantScheme scheme = QuantScheme::kChannelUniform;
  FineRowsOption fine;
};

struct KvMethod {
  std::string name;
  std::string summary;  // one line, for --help
  std::function<std::unique_ptr<KvCodec>(const KvCodecChoice&)> make;
};

// The chunk size every method is measured with, as a sender would cut the context.
inline constexpr int kMethodChunkTokens = 256;

const std::vector<KvMethod>& KvMethods();

// {"all"} or names of KvMethods(); an unknown name is an error listing the known ones.
Result<std::vector<const KvMethod*>> SelectKvMethods(const std::vector<std::string>& names);

}  // namespace kvstream
