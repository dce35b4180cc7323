// The segments of the transform scheme and of the predicted scheme, which codes its residual the same way
// (docs/format.md, "Scheme 3" and "Scheme 4"): the lossy frame without parameters or table bank, each
// stream's kept components, tables and step from the profile at its level, and the coded rows' integer
// weights laid out for the sums against a basis.
#pragma once

#include <cstdint>
#include <vector>

#include "codec/common/key_rotation.h"
#include "codec/common/predicted_rows.h"
#include "codec/decompress/lossy_segment.h"
#include "kvstream/codec.h"

namespace kvstream::codec {

class ComponentSegment : public LossySegment {
 public:
  // `rope`: the chunk's positions, which key segments rotate by.
  ComponentSegment(const uint8_t* chunk, const ChunkInfo& info, const Profile& profile, const SegmentInfo& seg,
                   const TensorView& out, const RopeTable* rope)
      : LossySegment(chunk, info, seg, out), profile_(profile), rope_(rope) {}
  virtual ~ComponentSegment() = default;

  // Reads the frame, each stream's kept components, tables and step taken from the profile at its level
  // (SetLevel): the counts, the symbol counts, the sink rows and the streams.
  Status Parse();

 protected:
  // The (layer, K/V)'s kept components, tables and step at `level` (1-based), from the scheme's section of
  // the profile.
  virtual void SetLevel(Level level, CodedStream* c) const = 0;
  // Each stream's integer weights (CodedStream::weights: its rows x WeightStride(its components); an
  // escape's weight is 0), their escaped components into escaped_ (by row, then component) and each coded
  // row's scaled step into row_scales_.
  Status ComponentWeights();
  // The weight classes (SumWeightRows) of the coded rows: the level's rows, then any fine rows.
  int WeightClasses(WeightRows classes[2]) const;

  const Profile& profile_;
  const RopeTable* rope_;
  std::vector<float> row_scales_;
  std::vector<EscapedComponent> escaped_;
};

}  // namespace kvstream::codec
