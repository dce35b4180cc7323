// The contents of a Profile (kvstream/profile.h), private to the codec, and its canonical serialiser.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "codec/common/table_bank.h"
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
  std::vector<uint8_t> bytes;            // canonical serialisation (set by Finalize)
  uint64_t hash = 0;

  size_t Index(int layer, int kv, int channel) const {
    return (static_cast<size_t>(layer) * 2 + static_cast<size_t>(kv)) * static_cast<size_t>(channels) +
           static_cast<size_t>(channel);
  }
  // The basis of (layer, K/V): channels x channels, row j = component j.
  const int16_t* Basis(int layer, int kv) const {
    return transform.bases.data() + Index(layer, kv, 0) * static_cast<size_t>(channels);
  }
  // Serialises the fields into bytes and computes hash.
  void Finalize();
};

// 64-bit FNV-1a; 0 is mapped to 1 so that 0 can mean "no profile".
uint64_t ProfileHash(const uint8_t* data, size_t size);

}  // namespace kvstream
