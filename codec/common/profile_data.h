// The contents of a Profile (kvstream/profile.h), private to the codec, and its canonical serialiser.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "codec/common/table_bank.h"
#include "common/half.h"
#include "codec/common/transform_sum.h"
#include "kvstream/profile.h"
#include "kvstream/rope.h"

namespace kvstream {

struct ProfileLevelData {
  std::vector<float> steps;  // [layer][K/V][channel], the channel-uniform step of this level
  codec::TableBank bank;     // index over [layer][K/V][channel]
};

// The transform scheme's data for one level: a step and a count of coded (kept) components per (layer,
// K/V), and tables over [layer][K/V][component].
struct ProfileTransformLevel {
  std::vector<float> steps;    // [layer][K/V]
  std::vector<uint32_t> kept;  // [layer][K/V]: components 0..kept-1 are coded, the rest reconstruct as 0
  codec::TableBank bank;       // index over [layer][K/V][component]
};

// The transform scheme (docs/codec.md, "Transform scheme"): per (layer, K/V) a mean and an orthonormal
// basis of the de-rotated keys or of the values, components by falling calibration variance.
struct ProfileTransform {
  RopeSpec rope;
  std::vector<float> means;  // [layer][K/V][channel], in the de-rotated domain for keys
  // [layer][K/V][component][channel]: round(u * 2^kBasisScaleBits) of the unit basis rows u
  std::vector<int16_t> bases;
  std::vector<ProfileTransformLevel> levels;  // [level - 1]
  std::vector<LevelQuality> quality;          // [level - 1], measured with this scheme
};

// The predicted scheme's data for one level: kept residual components and tables per (layer, K/V); the
// steps are the transform level's.
struct ProfilePredictionLevel {
  std::vector<uint32_t> kept;  // [layer][K/V]
  codec::TableBank bank;       // index over [layer][K/V][component]
};

// The predicted scheme (docs/codec.md, "Predicted"). Slices in decode order s = 2 x layer + K/V;
// slice s is predicted from the reconstructed rows of its input slices (PredictorInputs), one block of
// weights per input slice.
struct ProfilePrediction {
  std::vector<float> input_scales;    // [slice][channel]: inv_grid, a power of two (quantizer.h)
  std::vector<float> bias;            // [slice][channel]
  std::vector<int16_t> weights;       // [block][input channel][channel], blocks in slice order
  std::vector<float> weight_scales;   // [block][channel]
  std::vector<int16_t> bases;         // [slice][component][channel]: the residual's basis, as the transform's
  std::vector<ProfilePredictionLevel> levels;  // [level - 1]
  std::vector<LevelQuality> quality;           // [level - 1], measured with this scheme
};

// The input slices of slice s = 2 x layer + kv, in block order: keys of layer l > 0 read layer l - 1's
// keys and values; values read those and this layer's keys (layer 0's values: its keys only). Returns
// their count (0..3); *first_block: the number of blocks of the slices before s.
KVSTREAM_HD int PredictorInputs(int slice, int inputs[3], size_t* first_block = nullptr) {
  const auto count = [](int s) { return s == 0 ? 0 : s == 1 ? 1 : s % 2 == 0 ? 2 : 3; };
  if (first_block) {
    size_t before = 0;
    for (int s = 0; s < slice; ++s) before += static_cast<size_t>(count(s));
    *first_block = before;
  }
  const int layer = slice / 2, n = count(slice);
  if (layer > 0) inputs[0] = 2 * (layer - 1), inputs[1] = 2 * (layer - 1) + 1;
  if (slice % 2 == 1) inputs[n - 1] = 2 * layer;
  return n;
}

// Where slice s = 2 x layer + K/V keeps its rows' integer inputs for the slices after it, among 4 (the last
// two layers' keys and values): no slice still reads that place once s writes it (PredictorRing, and the
// GPU decoder's ring).
KVSTREAM_HD int PredictorRingSlot(int slice) { return (slice / 2) % 2 * 2 + slice % 2; }

struct ProfileData {
  std::string model;
  int layers = 0;
  int channels = 0;
  std::vector<float> means;  // [layer][K/V][channel]
  std::vector<LevelSpec> ladder;
  std::vector<LevelQuality> quality;
  std::vector<ProfileLevelData> levels;  // [level - 1]
  bool has_transform = false;
  ProfileTransform transform;
  bool has_prediction = false;  // only with a transform (its rope and level steps)
  ProfilePrediction prediction;
  // Fraction NaN (and level 0): not recorded, as in every profile before version 4.
  MeasuredFineRows measured_fine_rows{std::numeric_limits<double>::quiet_NaN(), 0};
  std::vector<uint8_t> bytes;            // canonical serialisation (set by Finalize)
  uint64_t hash = 0;
  // The int16 matrices packed for this CPU's kernels (transform_sum.h, PackedMatrix), set by
  // PrepareKernels; shared by copies, since the matrices never change once a Profile holds them.
  struct PackedMatrices {
    std::vector<codec::PackedMatrix> bases, residual_bases, predictor_blocks;
  };
  std::shared_ptr<const PackedMatrices> packed;

  size_t Index(int layer, int kv, int channel) const {
    return (static_cast<size_t>(layer) * 2 + static_cast<size_t>(kv)) * static_cast<size_t>(channels) +
           static_cast<size_t>(channel);
  }
  // The basis of (layer, K/V): channels x channels, row j = component j.
  const int16_t* Basis(int layer, int kv) const {
    return transform.bases.data() + Index(layer, kv, 0) * static_cast<size_t>(channels);
  }
  const int16_t* ResidualBasis(int slice) const {
    return prediction.bases.data() + static_cast<size_t>(slice) * static_cast<size_t>(channels) * static_cast<size_t>(channels);
  }
  // The packed Basis, ResidualBasis and predictor block b; null without them.
  const codec::PackedMatrix* PackedBasis(int layer, int kv) const {
    return packed && !packed->bases.empty() ? &packed->bases[static_cast<size_t>(layer) * 2 + static_cast<size_t>(kv)] : nullptr;
  }
  const codec::PackedMatrix* PackedResidualBasis(int slice) const {
    return packed && !packed->residual_bases.empty() ? &packed->residual_bases[static_cast<size_t>(slice)] : nullptr;
  }
  const codec::PackedMatrix* PackedPredictorBlock(size_t block) const {
    return packed && !packed->predictor_blocks.empty() ? &packed->predictor_blocks[block] : nullptr;
  }
  // Serialises the fields into bytes and computes hash.
  void Finalize();
  // Builds packed when the CPU runs AMX or AVX-512 VNNI; call once the matrices are final.
  void PrepareKernels();
};

// 64-bit FNV-1a; 0 is mapped to 1 so that 0 can mean "no profile".
uint64_t ProfileHash(const uint8_t* data, size_t size);

// What the codec (and its tests) read a Profile's data through; the data is private to codec/.
struct ProfileInternals {
  static const ProfileData& Data(const Profile& profile) { return *profile.data_; }
};
inline const ProfileData& DataOf(const Profile& profile) { return ProfileInternals::Data(profile); }

}  // namespace kvstream
