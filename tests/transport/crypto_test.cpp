// SHA-256 (FIPS 180-4 examples) and HMAC-SHA256 (RFC 4231).
#include <gtest/gtest.h>

#include <string>

#include "transport/sha256.h"

namespace kvstream::transport {
namespace {

std::string ToHex(const Digest256& d) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : d) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

TEST(Sha256, MatchesFipsExamples) {
  EXPECT_EQ(ToHex(Sha256Of("", 0)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(ToHex(Sha256Of("abc", 3)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(ToHex(Sha256Of(two_blocks.data(), two_blocks.size())),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, IncrementalUpdatesEqualOneShot) {
  const std::string million(1000000, 'a');
  Sha256 h;
  for (size_t i = 0; i < million.size(); i += 4999) h.Update(million.data() + i, std::min<size_t>(4999, million.size() - i));
  EXPECT_EQ(ToHex(h.Finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(HmacSha256, MatchesRfc4231) {
  const std::string key1(20, '\x0b');
  EXPECT_EQ(ToHex(HmacSha256(key1, "Hi There", 8)), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  const std::string msg2 = "what do ya want for nothing?";
  EXPECT_EQ(ToHex(HmacSha256("Jefe", msg2.data(), msg2.size())),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 6: a key longer than the block size is hashed first.
  const std::string key6(131, '\xaa');
  const std::string msg6 = "Test Using Larger Than Block-Size Key - Hash Key First";
  EXPECT_EQ(ToHex(HmacSha256(key6, msg6.data(), msg6.size())),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(DigestEqual, DetectsAnySingleByteDifference) {
  const Digest256 a = Sha256Of("x", 1);
  for (size_t i = 0; i < a.size(); ++i) {
    Digest256 b = a;
    b[i] ^= 1;
    EXPECT_FALSE(DigestEqual(a, b));
  }
  EXPECT_TRUE(DigestEqual(a, a));
}

}  // namespace
}  // namespace kvstream::transport
