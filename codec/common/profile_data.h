// The contents of a Profile (kvstream/profile.h), private to the codec, and its canonical serialiser.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "codec/common/table_bank.h"
#include "kvstream/profile.h"

namespace kvstream {

struct ProfileLevelData {
  std::vector<float> steps;  // [layer][K/V][channel], the channel-uniform step of this level
  codec::TableBank bank;     // index over [layer][K/V][channel]
};

struct ProfileData {
  std::string model;
  int layers = 0;
  int channels = 0;
  std::vector<float> means;  // [layer][K/V][channel]
  std::vector<LevelSpec> ladder;
  std::vector<LevelQuality> quality;
  std::vector<ProfileLevelData> levels;  // [level - 1]
  std::vector<uint8_t> bytes;            // canonical serialisation (set by Finalize)
  uint64_t hash = 0;

  size_t Index(int layer, int kv, int channel) const {
    return (static_cast<size_t>(layer) * 2 + static_cast<size_t>(kv)) * static_cast<size_t>(channels) +
           static_cast<size_t>(channel);
  }
  // Serialises the fields into bytes and computes hash.
  void Finalize();
};

// 64-bit FNV-1a; 0 is mapped to 1 so that 0 can mean "no profile".
uint64_t ProfileHash(const uint8_t* data, size_t size);

}  // namespace kvstream
