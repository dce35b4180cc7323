// stream_cli.cpp — see stream_cli.h.
#include "tools/stream_cli.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kvstream/model.h"
#include "kvstream/quality.h"
#include "kvstream/stream.h"
#include "tools/codec_files.h"
#include "tools/command.h"

namespace kvstream::cli {

Status SetSenderCodec(const Args& args, const ModelConfig& config, SenderOptions* options,
                      const std::string& what) {
  if (args.Has("profile")) {
    KVSTREAM_ASSIGN_OR_RETURN(Profile profile, Profile::Load(args.GetString("profile")));
    KVSTREAM_RETURN_IF_ERROR(profile.CheckShape(config.n_layers, config.kv_dim(), what)
                                 .WithContext("--profile " + args.GetString("profile")));
    KVSTREAM_RETURN_IF_ERROR(
        profile.CheckRope(config.rope(), what).WithContext("--profile " + args.GetString("profile")));
    options->profile = std::make_shared<const Profile>(std::move(profile));
  }
  KVSTREAM_ASSIGN_OR_RETURN(options->scheme, ParseQuantScheme(args.GetString("scheme", "channel-uniform")));
  return ParseFineRows(args, &options->fine_fraction, &options->fine_level);
}

Result<std::pair<std::string, int>> ParseHostPort(const std::string& flag, const std::string& value) {
  const size_t colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == value.size()) {
    return Status::InvalidArgument("--" + flag + " = '" + value + "': expected HOST:PORT");
  }
  const std::string port_text = value.substr(colon + 1);
  if (port_text.find_first_not_of("0123456789") != std::string::npos || port_text.size() > 5) {
    return Status::InvalidArgument("--" + flag + " = '" + value + "': port '" + port_text + "' is not a number");
  }
  const int port = std::stoi(port_text);
  if (port > 65535) return Status::InvalidArgument("--" + flag + ": port " + port_text + " exceeds 65535");
  return std::make_pair(value.substr(0, colon), port);
}

Result<std::string> ReadSecretFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("--secret-file " + path + ": cannot open");
  std::string secret(4097, '\0');
  in.read(secret.data(), static_cast<std::streamsize>(secret.size()));
  secret.resize(static_cast<size_t>(in.gcount()));
  if (secret.size() > 4096) return Status::InvalidArgument("--secret-file " + path + ": longer than 4096 bytes");
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) return Status::InvalidArgument("--secret-file " + path + " is empty");
  return secret;
}

Result<TextContext> PrefillWindow(const Model& model, const std::vector<int>& tokens, int index, int window) {
  const size_t begin = static_cast<size_t>(index) * static_cast<size_t>(window);
  if (window <= 0 || begin + static_cast<size_t>(window) > tokens.size()) {
    return Status::InvalidArgument("context " + std::to_string(index) + " needs tokens [" + std::to_string(begin) + ", " +
                                   std::to_string(begin + window) + "), the text has " + std::to_string(tokens.size()));
  }
  if (window > model.config().max_seq_len) {
    return Status::InvalidArgument("--tokens = " + std::to_string(window) + " exceeds the model's max_seq_len = " +
                                   std::to_string(model.config().max_seq_len));
  }
  TextContext ctx;
  ctx.tokens.assign(tokens.begin() + static_cast<long>(begin), tokens.begin() + static_cast<long>(begin + window));
  ctx.cache = KvCache::Allocate(model.config(), window);
  KVSTREAM_RETURN_IF_ERROR(model.Forward(ctx.tokens, ctx.cache, nullptr));
  return ctx;
}

double WireBitsPerValue(const KvCache& cache, uint64_t bytes) {
  const double values = 2.0 * cache.layers * cache.tokens * cache.kv_dim;
  return values > 0 ? 8.0 * static_cast<double>(bytes) / values : 0.0;
}

}  // namespace kvstream::cli
