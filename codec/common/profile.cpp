// Profile: default ladder, canonical serialisation, hashing and defensive parsing (docs/format.md,
// "Profile").
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>

#include "codec/common/cpu_features.h"
#include "common/whole_file.h"
#include "codec/common/crc32c.h"
#include "codec/common/profile_data.h"
#include "codec/common/quantizer.h"

namespace kvstream {

using codec::ByteReader;
using codec::ByteWriter;

namespace {

// Steps relative to the (layer, K/V) base step (the RMS channel std), the same for keys and values,
// from the rate-distortion study on SmolLM2-135M with sink rows (lab/rate-distortion.md): 0.10 was
// the first to reach negligible quality (ppl -0.35 %, top-1 0.992), 0.5 keeps ppl within 1 %.
constexpr float kDefaultMultipliers[] = {0.10f, 0.15f, 0.25f, 0.35f, 0.5f, 1.0f};

}  // namespace

std::vector<LevelSpec> DefaultLadder(int layers) {
  return LadderOfSteps(layers, std::vector<float>(std::begin(kDefaultMultipliers), std::end(kDefaultMultipliers)));
}

std::string HashHex(uint64_t hash) {
  char text[20];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

std::vector<LevelSpec> LadderOfSteps(int /*layers*/, const std::vector<float>& multipliers) {
  std::vector<LevelSpec> ladder;
  for (size_t i = 0; i < multipliers.size(); ++i) {
    LevelSpec s;
    s.level = static_cast<Level>(i + 1);
    s.step_multiplier[0] = s.step_multiplier[1] = multipliers[i];
    ladder.push_back(s);
  }
  return ladder;
}

uint64_t ProfileHash(const uint8_t* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= data[i];
    h *= 0x100000001b3ull;
  }
  return h == 0 ? 1 : h;
}

namespace {

void WriteQuality(const LevelQuality& q, ByteWriter& w) {
  w.F64(q.top1_agreement);
  w.F64(q.ppl_delta_pct);
  w.F64(q.kl_mean);
  w.F64(q.bits_per_value);
}

Status ReadQuality(ByteReader& in, LevelQuality* q) {
  KVSTREAM_RETURN_IF_ERROR(in.F64(&q->top1_agreement, "quality"));
  KVSTREAM_RETURN_IF_ERROR(in.F64(&q->ppl_delta_pct, "quality"));
  KVSTREAM_RETURN_IF_ERROR(in.F64(&q->kl_mean, "quality"));
  return in.F64(&q->bits_per_value, "quality");
}

}  // namespace

void ProfileData::PrepareKernels() {
  // A prediction needs the transform; CPUs without AMX or AVX-512 VNNI have no layout of their own.
  if (!has_transform || (!codec::AmxEnabled() && !codec::Avx512VnniEnabled())) return;
  auto m = std::make_shared<PackedMatrices>();
  const int64_t n = channels;
  const size_t square = static_cast<size_t>(n * n);
  const auto pack_all = [&](const std::vector<int16_t>& matrices, std::vector<codec::PackedMatrix>* out) {
    for (size_t at = 0; at + square <= matrices.size(); at += square) {
      out->push_back(codec::PackedMatrix::Pack(matrices.data() + at, n, n));
    }
  };
  if (has_transform) pack_all(transform.bases, &m->bases);
  if (has_prediction) {
    pack_all(prediction.bases, &m->residual_bases);
    pack_all(prediction.weights, &m->predictor_blocks);
  }
  packed = std::move(m);
}

void ProfileData::Finalize() {
  bytes.clear();
  ByteWriter w(&bytes);
  w.Raw(codec::kProfileMagic, 4);
  w.U16(codec::kProfileVersion);
  w.U16(0);
  w.U32(static_cast<uint32_t>(layers));
  w.U32(static_cast<uint32_t>(channels));
  w.U32(static_cast<uint32_t>(ladder.size()));
  w.U8(static_cast<uint8_t>(model.size()));
  w.Raw(model.data(), model.size());
  w.Raw(means.data(), means.size() * sizeof(float));
  for (size_t i = 0; i < ladder.size(); ++i) {
    const LevelSpec& s = ladder[i];
    w.U32(static_cast<uint32_t>(s.level));
    w.F32(s.step_multiplier[0]);
    w.F32(s.step_multiplier[1]);
    WriteQuality(quality[i], w);
    w.Raw(levels[i].steps.data(), levels[i].steps.size() * sizeof(float));
    codec::WriteTableBank(levels[i].bank, w);
  }
  w.U8(has_transform ? 1 : 0);
  if (has_transform) {
    const ProfileTransform& t = transform;
    w.U32(static_cast<uint32_t>(t.rope.head_dim));
    w.F32(t.rope.theta);
    w.U8(static_cast<uint8_t>(t.rope.layout));
    w.Raw(t.means.data(), t.means.size() * sizeof(float));
    w.Raw(t.bases.data(), t.bases.size() * sizeof(int16_t));
    for (size_t i = 0; i < t.levels.size(); ++i) {
      const ProfileTransformLevel& level = t.levels[i];
      WriteQuality(t.quality[i], w);
      w.Raw(level.steps.data(), level.steps.size() * sizeof(float));
      w.Raw(level.kept.data(), level.kept.size() * sizeof(uint32_t));
      codec::WriteTableBank(level.bank, w);
    }
  }
  w.U8(has_prediction ? 1 : 0);
  if (has_prediction) {
    const ProfilePrediction& p = prediction;
    w.Raw(p.input_scales.data(), p.input_scales.size() * sizeof(float));
    w.Raw(p.bias.data(), p.bias.size() * sizeof(float));
    w.Raw(p.weights.data(), p.weights.size() * sizeof(int16_t));
    w.Raw(p.weight_scales.data(), p.weight_scales.size() * sizeof(float));
    w.Raw(p.bases.data(), p.bases.size() * sizeof(int16_t));
    for (size_t i = 0; i < p.levels.size(); ++i) {
      WriteQuality(p.quality[i], w);
      w.Raw(p.levels[i].kept.data(), p.levels[i].kept.size() * sizeof(uint32_t));
      codec::WriteTableBank(p.levels[i].bank, w);
    }
  }
  w.F64(measured_fine_rows.fraction);
  w.U8(static_cast<uint8_t>(measured_fine_rows.level));
  w.U32(codec::Crc32c(bytes.data(), bytes.size()));
  hash = ProfileHash(bytes.data(), bytes.size());
}

namespace {

Status CheckRange(const std::string& field, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    return Status::CorruptData("profile: " + field + " = " + std::to_string(value) + " outside [" +
                               std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return Status::Ok();
}

// count little-endian values of T, checked against the bytes left before anything is allocated.
template <typename T>
Status ReadArray(ByteReader& in, size_t count, std::vector<T>* out, const char* field) {
  uint64_t bytes = 0;
  if (!codec::MulWithin(count, sizeof(T), in.remaining(), &bytes)) {
    return Status::CorruptData(std::string("profile: ") + field + " needs " + std::to_string(count) + " values of " +
                               std::to_string(sizeof(T)) + " bytes but only " + std::to_string(in.remaining()) +
                               " bytes remain");
  }
  out->resize(count);
  return in.Read(out->data(), bytes, field);
}

Status ReadFloats(ByteReader& in, size_t count, std::vector<float>* out, const char* field, bool positive) {
  KVSTREAM_RETURN_IF_ERROR(ReadArray(in, count, out, field));
  for (size_t i = 0; i < count; ++i) {
    const float v = (*out)[i];
    if (!std::isfinite(v) || (positive && !(v > 0.0f))) {
      return Status::CorruptData(std::string("profile: ") + field + "[" + std::to_string(i) + "] = " +
                                 std::to_string(v) + (positive ? " is not a finite positive number" : " is not finite"));
    }
  }
  return Status::Ok();
}

// count int16 values, each within [-bound, bound].
Status ReadInt16s(ByteReader& in, size_t count, int bound, std::vector<int16_t>* out, const char* field) {
  KVSTREAM_RETURN_IF_ERROR(ReadArray(in, count, out, field));
  for (int16_t v : *out) {
    if (std::abs(v) > bound) {
      return Status::CorruptData(std::string("profile: ") + field + " holds " + std::to_string(v) + ", beyond +-" +
                                 std::to_string(bound));
    }
  }
  return Status::Ok();
}

// The optional transform section (after the levels), checked like the rest.
Status ReadTransform(ByteReader& in, ProfileData* d) {
  uint8_t present = 0;
  KVSTREAM_RETURN_IF_ERROR(in.U8(&present, "transform flag"));
  KVSTREAM_RETURN_IF_ERROR(CheckRange("transform flag", present, 0, 1));
  d->has_transform = present == 1;
  if (!d->has_transform) return Status::Ok();
  ProfileTransform& t = d->transform;
  uint32_t head_dim = 0;
  uint8_t layout = 0;
  KVSTREAM_RETURN_IF_ERROR(in.U32(&head_dim, "rope head_dim"));
  KVSTREAM_RETURN_IF_ERROR(in.F32(&t.rope.theta, "rope theta"));
  KVSTREAM_RETURN_IF_ERROR(in.U8(&layout, "rope layout"));
  if (head_dim < 2 || head_dim % 2 != 0 || head_dim > static_cast<uint32_t>(d->channels) || d->channels % head_dim != 0) {
    return Status::CorruptData("profile: rope head_dim = " + std::to_string(head_dim) + " must be even and divide " +
                               std::to_string(d->channels) + " channels");
  }
  if (!std::isfinite(t.rope.theta) || !(t.rope.theta > 0.0f)) {
    return Status::CorruptData("profile: rope theta = " + std::to_string(t.rope.theta) + " is not a finite positive number");
  }
  KVSTREAM_RETURN_IF_ERROR(CheckRange("rope layout", layout, 0, 1));
  t.rope.head_dim = static_cast<int>(head_dim);
  t.rope.layout = static_cast<RopeLayout>(layout);
  const size_t per_level = static_cast<size_t>(d->layers) * 2 * static_cast<size_t>(d->channels);
  const size_t slices = static_cast<size_t>(d->layers) * 2;
  KVSTREAM_RETURN_IF_ERROR(ReadFloats(in, per_level, &t.means, "transform means", false));
  if (d->channels > codec::kMaxTransformChannels) {
    return Status::CorruptData("profile: a transform over " + std::to_string(d->channels) + " channels (at most " +
                               std::to_string(codec::kMaxTransformChannels) + ")");
  }
  KVSTREAM_RETURN_IF_ERROR(ReadInt16s(in, per_level * static_cast<size_t>(d->channels), 1 << codec::kBasisScaleBits, &t.bases,
                                       "transform basis"));
  t.levels.resize(d->ladder.size());
  t.quality.resize(d->ladder.size());
  for (size_t i = 0; i < t.levels.size(); ++i) {
    ProfileTransformLevel& level = t.levels[i];
    KVSTREAM_RETURN_IF_ERROR(ReadQuality(in, &t.quality[i]));
    KVSTREAM_RETURN_IF_ERROR(ReadFloats(in, slices, &level.steps, "transform steps", true));
    KVSTREAM_RETURN_IF_ERROR(ReadArray(in, slices, &level.kept, "transform kept counts"));
    for (uint32_t k : level.kept) KVSTREAM_RETURN_IF_ERROR(CheckRange("transform kept components", k, 0, d->channels));
    Status st = codec::ReadTableBank(in, per_level, &level.bank);
    if (!st.ok()) return st.WithContext("transform level " + std::to_string(i + 1));
  }
  return Status::Ok();
}

// The optional prediction section (after the transform; profile version 3 on), checked like the rest.
Status ReadPrediction(ByteReader& in, ProfileData* d) {
  uint8_t present = 0;
  KVSTREAM_RETURN_IF_ERROR(in.U8(&present, "prediction flag"));
  KVSTREAM_RETURN_IF_ERROR(CheckRange("prediction flag", present, 0, d->has_transform ? 1 : 0));
  d->has_prediction = present == 1;
  if (!d->has_prediction) return Status::Ok();
  ProfilePrediction& p = d->prediction;
  const size_t c_n = static_cast<size_t>(d->channels);
  const int slices = d->layers * 2;
  const size_t per_slice = static_cast<size_t>(slices) * c_n;
  int inputs[3];
  size_t blocks = 0;
  PredictorInputs(slices, inputs, &blocks);  // the blocks of every slice before a slice past the last
  KVSTREAM_RETURN_IF_ERROR(ReadFloats(in, per_slice, &p.input_scales, "predictor input scales", true));
  for (float scale : p.input_scales) {
    int exponent = 0;
    if (std::frexp(scale, &exponent) != 0.5f || exponent < -60 || exponent > 60) {
      return Status::CorruptData("profile: predictor input scale " + std::to_string(scale) +
                                 " is not a power of two in [2^-61, 2^59]");
    }
  }
  KVSTREAM_RETURN_IF_ERROR(ReadFloats(in, per_slice, &p.bias, "predictor bias", false));
  KVSTREAM_RETURN_IF_ERROR(ReadInt16s(in, blocks * c_n * c_n, codec::MaxPredictorWeight(d->channels), &p.weights,
                                      "predictor weight"));
  KVSTREAM_RETURN_IF_ERROR(ReadFloats(in, blocks * c_n, &p.weight_scales, "predictor weight scales", false));
  KVSTREAM_RETURN_IF_ERROR(ReadInt16s(in, per_slice * c_n, 1 << codec::kBasisScaleBits, &p.bases, "residual basis"));
  p.levels.resize(d->ladder.size());
  p.quality.resize(d->ladder.size());
  for (size_t i = 0; i < p.levels.size(); ++i) {
    ProfilePredictionLevel& level = p.levels[i];
    KVSTREAM_RETURN_IF_ERROR(ReadQuality(in, &p.quality[i]));
    KVSTREAM_RETURN_IF_ERROR(ReadArray(in, static_cast<size_t>(slices), &level.kept, "predicted kept counts"));
    for (uint32_t k : level.kept) KVSTREAM_RETURN_IF_ERROR(CheckRange("predicted kept components", k, 0, d->channels));
    Status st = codec::ReadTableBank(in, per_slice, &level.bank);
    if (!st.ok()) return st.WithContext("prediction level " + std::to_string(i + 1));
  }
  return Status::Ok();
}

// NaN at level 0 (not recorded) is valid in the bytes; WithMeasuredFineRows takes a measurement only.
Status CheckMeasuredFineRows(const MeasuredFineRows& fine, size_t levels, bool allow_unrecorded) {
  const bool unrecorded = allow_unrecorded && std::isnan(fine.fraction) && fine.level == 0;
  const bool none = fine.fraction == 0.0 && fine.level == 0;
  const bool some = fine.fraction > 0.0 && fine.fraction <= 1.0 && fine.level >= 1 && static_cast<size_t>(fine.level) <= levels;
  if (unrecorded || none || some) return Status::Ok();
  return Status::InvalidArgument("profile: measured fine rows " + std::to_string(fine.fraction) + " at level " +
                                 std::to_string(fine.level) + ", expected a fraction in (0, 1] at a level in 1.." +
                                 std::to_string(levels) + ", or 0 at level 0");
}

// The fine rows of the measured qualities (profile version 4 on).
Status ReadMeasuredFineRows(ByteReader& in, ProfileData* d) {
  uint8_t level = 0;
  KVSTREAM_RETURN_IF_ERROR(in.F64(&d->measured_fine_rows.fraction, "measured fine-row fraction"));
  KVSTREAM_RETURN_IF_ERROR(in.U8(&level, "measured fine-row level"));
  d->measured_fine_rows.level = static_cast<Level>(level);
  const Status st = CheckMeasuredFineRows(d->measured_fine_rows, d->ladder.size(), /*allow_unrecorded=*/true);
  return st.ok() ? st : Status::CorruptData(st.message());
}

}  // namespace

Result<Profile> Profile::Load(const std::string& path, const ProfileLimits& limits) {
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadWholeFile(path, limits.max_bytes));
  Result<Profile> profile = Parse(bytes.data(), bytes.size(), limits);
  if (!profile.ok()) return profile.status().WithContext(path);
  return profile;
}

Result<Profile> Profile::Parse(const uint8_t* data, size_t size, const ProfileLimits& limits) {
  if (size > limits.max_bytes) {
    return Status::ResourceExhausted("profile: " + std::to_string(size) + " bytes exceeds limit " +
                                     std::to_string(limits.max_bytes));
  }
  if (size < 4 + 4) return Status::CorruptData("profile: " + std::to_string(size) + " bytes is too short");
  if (std::memcmp(data, codec::kProfileMagic, 4) != 0) return Status::CorruptData("profile: bad magic (not a kvstream profile)");
  uint32_t stored_crc = 0;
  std::memcpy(&stored_crc, data + size - 4, 4);
  const uint32_t crc = codec::Crc32c(data, size - 4);
  if (crc != stored_crc) {
    return Status::CorruptData("profile: CRC32C " + std::to_string(crc) + " does not match stored " +
                               std::to_string(stored_crc));
  }
  ByteReader in(data, size - 4, "profile");
  uint8_t magic[4];
  KVSTREAM_RETURN_IF_ERROR(in.Read(magic, 4, "magic"));
  uint16_t version = 0, reserved = 0;
  KVSTREAM_RETURN_IF_ERROR(in.U16(&version, "version"));
  if (version != codec::kProfileVersion) {
    return Status::Unsupported("profile: unsupported version " + std::to_string(version) +
                               " (this build reads profile version " + std::to_string(codec::kProfileVersion) + ")");
  }
  KVSTREAM_RETURN_IF_ERROR(in.U16(&reserved, "reserved"));
  uint32_t layers = 0, channels = 0, level_count = 0;
  KVSTREAM_RETURN_IF_ERROR(in.U32(&layers, "layers"));
  KVSTREAM_RETURN_IF_ERROR(in.U32(&channels, "channels"));
  KVSTREAM_RETURN_IF_ERROR(in.U32(&level_count, "level count"));
  KVSTREAM_RETURN_IF_ERROR(CheckRange("layers", layers, 1, limits.max_layers));
  KVSTREAM_RETURN_IF_ERROR(CheckRange("channels", channels, 1, limits.max_channels));
  KVSTREAM_RETURN_IF_ERROR(CheckRange("level count", level_count, 1, kMaxLossyLevel));
  auto d = std::make_shared<ProfileData>();
  d->layers = static_cast<int>(layers);
  d->channels = static_cast<int>(channels);
  uint8_t name_len = 0;
  KVSTREAM_RETURN_IF_ERROR(in.U8(&name_len, "model name length"));
  d->model.resize(name_len);
  KVSTREAM_RETURN_IF_ERROR(in.Read(d->model.data(), name_len, "model name"));
  const size_t per_level = static_cast<size_t>(layers) * 2 * channels;
  KVSTREAM_RETURN_IF_ERROR(ReadFloats(in, per_level, &d->means, "means", false));
  for (uint32_t i = 0; i < level_count; ++i) {
    LevelSpec s;
    uint32_t u = 0;
    KVSTREAM_RETURN_IF_ERROR(in.U32(&u, "level"));
    if (u != i + 1) {
      return Status::CorruptData("profile: level entry " + std::to_string(i) + " is level " + std::to_string(u) +
                                 ", expected " + std::to_string(i + 1));
    }
    s.level = static_cast<Level>(u);
    KVSTREAM_RETURN_IF_ERROR(in.F32(&s.step_multiplier[0], "key step multiplier"));
    KVSTREAM_RETURN_IF_ERROR(in.F32(&s.step_multiplier[1], "value step multiplier"));
    for (float f : {s.step_multiplier[0], s.step_multiplier[1]}) {
      if (!std::isfinite(f) || !(f > 0.0f)) {
        return Status::CorruptData("profile: level " + std::to_string(i + 1) + " has a non-positive step parameter " +
                                   std::to_string(f));
      }
    }
    LevelQuality q;
    KVSTREAM_RETURN_IF_ERROR(ReadQuality(in, &q));
    ProfileLevelData level;
    KVSTREAM_RETURN_IF_ERROR(ReadFloats(in, per_level, &level.steps, "steps", true));
    Status st = codec::ReadTableBank(in, per_level, &level.bank);
    if (!st.ok()) return st.WithContext("level " + std::to_string(i + 1));
    d->ladder.push_back(s);
    d->quality.push_back(q);
    d->levels.push_back(std::move(level));
  }
  KVSTREAM_RETURN_IF_ERROR(ReadTransform(in, &*d));
  KVSTREAM_RETURN_IF_ERROR(ReadPrediction(in, &*d));
  KVSTREAM_RETURN_IF_ERROR(ReadMeasuredFineRows(in, &*d));
  if (in.remaining() != 0) {
    return Status::CorruptData("profile: " + std::to_string(in.remaining()) + " bytes left over after the last section");
  }
  d->bytes.assign(data, data + size);
  d->hash = ProfileHash(data, size);
  d->PrepareKernels();
  return Profile(std::move(d));
}

const std::vector<uint8_t>& Profile::bytes() const { return data_->bytes; }
uint64_t Profile::hash() const { return data_->hash; }
const std::string& Profile::model() const { return data_->model; }
int Profile::layers() const { return data_->layers; }
int Profile::channels() const { return data_->channels; }
Status Profile::CheckShape(int64_t layers, int64_t channels, const std::string& what) const {
  if (layers == data_->layers && channels == data_->channels) return Status::Ok();
  return Status::InvalidArgument("profile '" + data_->model + "' is for " + std::to_string(data_->layers) + " layers x " +
                                 std::to_string(data_->channels) + " channels, " + what + " has " + std::to_string(layers) +
                                 " x " + std::to_string(channels));
}
Status Profile::CheckRope(const RopeSpec& rope, const std::string& what) const {
  if (!data_->has_transform) return Status::Ok();
  const RopeSpec& mine = data_->transform.rope;
  if (rope.head_dim == mine.head_dim && rope.theta == mine.theta && rope.layout == mine.layout) return Status::Ok();
  const auto text = [](const RopeSpec& r) {
    char s[96];
    std::snprintf(s, sizeof s, "head_dim %d, theta %g, %s", r.head_dim, static_cast<double>(r.theta),
                  r.layout == RopeLayout::kInterleaved ? "interleaved" : "rotate-half");
    return std::string(s);
  };
  return Status::InvalidArgument("profile '" + data_->model + "' undoes RoPE with " + text(mine) + ", " + what +
                                 " rotates keys with " + text(rope));
}

const std::vector<LevelSpec>& Profile::ladder() const { return data_->ladder; }
const std::vector<LevelQuality>& Profile::quality() const { return data_->quality; }

bool Profile::Supports(QuantScheme scheme) const {
  switch (scheme) {
    case QuantScheme::kChannelUniform: return true;
    case QuantScheme::kTransform: return data_->has_transform;
    case QuantScheme::kPredicted: return data_->has_prediction;
  }
  return false;
}

const std::vector<LevelQuality>& Profile::QualityOf(QuantScheme scheme) const {
  static const std::vector<LevelQuality> kNone;
  if (!Supports(scheme)) return kNone;
  return scheme == QuantScheme::kTransform   ? data_->transform.quality
         : scheme == QuantScheme::kPredicted ? data_->prediction.quality
                                             : data_->quality;
}

Result<Profile> Profile::WithQuality(Level level, const LevelQuality& quality, QuantScheme scheme) const {
  if (level < 1 || level > static_cast<Level>(data_->ladder.size())) {
    return Status::InvalidArgument("profile: level " + std::to_string(level) + " not in the ladder 1.." +
                                   std::to_string(data_->ladder.size()));
  }
  if (!Supports(scheme)) {
    return Status::InvalidArgument(std::string("profile: no ") + SchemeName(scheme) + " scheme to record a quality for");
  }
  auto copy = std::make_shared<ProfileData>(*data_);
  std::vector<LevelQuality>& target = scheme == QuantScheme::kTransform   ? copy->transform.quality
                                      : scheme == QuantScheme::kPredicted ? copy->prediction.quality
                                                                          : copy->quality;
  target[static_cast<size_t>(level - 1)] = quality;
  copy->Finalize();
  return Profile(std::move(copy));
}

ProfileSummary Profile::Summary() const {
  const ProfileData& d = *data_;
  const auto share = [&](const std::vector<uint32_t>& kept) {
    uint64_t sum = 0;
    for (uint32_t k : kept) sum += k;
    return kept.empty() ? 0.0 : static_cast<double>(sum) / (static_cast<double>(kept.size()) * d.channels);
  };
  ProfileSummary s;
  if (d.has_transform) {
    for (const ProfileTransformLevel& l : d.transform.levels) s.transform.kept_share.push_back(share(l.kept));
    s.transform_rope = d.transform.rope;
  }
  if (d.has_prediction) {
    for (const ProfilePredictionLevel& l : d.prediction.levels) s.predicted.kept_share.push_back(share(l.kept));
    s.predictor_matrices = static_cast<int>(d.prediction.weight_scales.size() / static_cast<size_t>(d.channels));
    s.byte_predictors = std::all_of(d.prediction.weights.begin(), d.prediction.weights.end(),
                                    [](int16_t w) { return w >= -128 && w <= 127; });
  }
  return s;
}

std::optional<MeasuredFineRows> Profile::measured_fine_rows() const {
  if (std::isnan(data_->measured_fine_rows.fraction)) return std::nullopt;
  return data_->measured_fine_rows;
}

Result<Profile> Profile::WithMeasuredFineRows(const MeasuredFineRows& fine) const {
  KVSTREAM_RETURN_IF_ERROR(CheckMeasuredFineRows(fine, data_->ladder.size(), /*allow_unrecorded=*/false));
  auto copy = std::make_shared<ProfileData>(*data_);
  copy->measured_fine_rows = fine;
  copy->Finalize();
  return Profile(std::move(copy));
}

}  // namespace kvstream
