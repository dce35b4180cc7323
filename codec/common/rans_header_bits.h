// The bit reader of a rANS stream's header (docs/rans.md, "Stream layout"), written once for the CPU
// decoder and the CUDA kernels: bits packed into bytes from each byte's least significant bit; past the
// end it reads zeros and remembers that it overran.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/half.h"

namespace kvstream::codec {

class RansHeaderBits {
 public:
  KVSTREAM_HD RansHeaderBits(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  // The next `count` bits, count <= 64.
  KVSTREAM_HD uint64_t Get(int count) {
    if (count > 32) {
      const uint64_t low = Get(32);
      return low | Get(count - 32) << 32;
    }
    for (; pending_bits_ < count; ++next_, pending_bits_ += 8) {
      if (next_ >= size_) {
        overran_ = true;
        continue;
      }
      pending_ |= uint64_t{data_[next_]} << pending_bits_;
    }
    const uint64_t value = pending_ & ((uint64_t{1} << count) - 1);
    pending_ >>= count;
    pending_bits_ -= count;
    return value;
  }

  KVSTREAM_HD size_t bytes_read() const { return next_; }
  KVSTREAM_HD bool overran() const { return overran_; }
  KVSTREAM_HD bool spare_bits_zero() const { return pending_ == 0; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t next_ = 0;
  uint64_t pending_ = 0;
  int pending_bits_ = 0;
  bool overran_ = false;
};

}  // namespace kvstream::codec
