// Tests of CRC32C: published check values, extension, and the SSE4.2 path against the portable one.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec/common/crc32c.h"

namespace kvstream::codec {
namespace {

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  // RFC 3720 (iSCSI), appendix B.4.
  std::vector<uint8_t> buf(32, 0);
  EXPECT_EQ(Crc32c(buf.data(), buf.size()), 0x8A9136AAu);
  std::fill(buf.begin(), buf.end(), 0xff);
  EXPECT_EQ(Crc32c(buf.data(), buf.size()), 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(buf.data(), buf.size()), 0x46DD794Eu);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(31 - i);
  EXPECT_EQ(Crc32c(buf.data(), buf.size()), 0x113FDB5Cu);
  const std::string fox = "The quick brown fox jumps over the lazy dog";
  EXPECT_EQ(Crc32c(fox.data(), fox.size()), 0x22620404u);
}

TEST(Crc32c, PortableAndHardwareAgreeAtEveryLengthAndAlignment) {
  std::mt19937 rng(1);
  std::vector<uint8_t> data(3 * 4096 * 3 + 100);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const bool hw = detail::Crc32cHardwareAvailable();
  const size_t lengths[] = {0, 1, 7, 8, 9, 63, 4096, 3 * 4096 - 1, 3 * 4096, 3 * 4096 + 1, 6 * 4096 + 77,
                            data.size() - 8};
  for (size_t len : lengths) {
    for (size_t offset = 0; offset < 8; ++offset) {
      const uint32_t portable = detail::Crc32cExtendPortable(0, data.data() + offset, len);
      EXPECT_EQ(Crc32c(data.data() + offset, len), portable) << "len " << len << " offset " << offset;
      if (hw) {
        EXPECT_EQ(detail::Crc32cExtendSse42(0, data.data() + offset, len), portable)
            << "len " << len << " offset " << offset;
      }
    }
  }
}

TEST(Crc32c, ExtendEqualsOneShot) {
  std::mt19937 rng(2);
  std::vector<uint8_t> data(50000);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const uint32_t whole = Crc32c(data.data(), data.size());
  for (size_t split : {size_t{0}, size_t{1}, size_t{13}, size_t{12288}, size_t{49999}, data.size()}) {
    const uint32_t a = Crc32c(data.data(), split);
    EXPECT_EQ(Crc32cExtend(a, data.data() + split, data.size() - split), whole) << "split " << split;
    EXPECT_EQ(detail::Crc32cExtendPortable(detail::Crc32cExtendPortable(0, data.data(), split),
                                           data.data() + split, data.size() - split),
              whole);
  }
}

TEST(Crc32c, DetectsASingleBitFlip) {
  std::vector<uint8_t> data(4096 * 3 + 5, 0x5a);
  const uint32_t before = Crc32c(data.data(), data.size());
  data[7000] ^= 0x10;
  EXPECT_NE(Crc32c(data.data(), data.size()), before);
}

}  // namespace
}  // namespace kvstream::codec
