#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "kvstream/tensor.h"

namespace kvstream {
namespace {

TEST(TensorView, DenseViewHasRowMajorStrides) {
  std::vector<float> buf(2 * 3 * 4);
  TensorView v = TensorView::Dense(buf.data(), DType::kF32, 2, 3, 4);
  EXPECT_TRUE(v.is_dense());
  EXPECT_EQ(v.offset(1, 2, 3), 23);
  EXPECT_TRUE(ValidateView(v, "v").ok());
}

TEST(TensorView, StridedAccessConvertsDtypes) {
  std::vector<uint16_t> buf(2 * 8, 0);
  TensorView v;
  v.data = buf.data();
  v.dtype = DType::kF16;
  v.shape[0] = 1; v.shape[1] = 2; v.shape[2] = 2;
  v.strides[0] = 16; v.strides[1] = 8; v.strides[2] = 2;  // padded, every other element
  StoreFromFloat(v, 0, 1, 1, 1.5f);
  EXPECT_EQ(buf[10], 0x3e00u);
  EXPECT_FLOAT_EQ(LoadAsFloat(v, 0, 1, 1), 1.5f);
  EXPECT_FALSE(v.is_dense());
}

TEST(TensorView, SliceAndCopyConvertTheSelectedTokens) {
  std::vector<float> src(2 * 4 * 3);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) + 0.25f;
  const TensorView all = TensorView::Dense(src.data(), DType::kF32, 2, 4, 3);
  const TensorView middle = SliceTokens(all, 1, 2);
  std::vector<uint16_t> dst(2 * 2 * 3);
  const TensorView out = TensorView::Dense(dst.data(), DType::kBF16, 2, 2, 3);
  ASSERT_TRUE(CopyView(middle, out).ok());
  EXPECT_FLOAT_EQ(LoadAsFloat(out, 1, 1, 2), LoadAsFloat(all, 1, 2, 2));
  EXPECT_FLOAT_EQ(LoadAsFloat(out, 0, 0, 0), 3.25f);
  const TensorView wrong = TensorView::Dense(dst.data(), DType::kBF16, 2, 3, 2);
  EXPECT_NE(CopyView(middle, wrong).message().find("destination tokens = 3"), std::string::npos);
}

TEST(TensorView, ValidateRejectsNullNegativeAndOverflowingViews) {
  TensorView v = TensorView::Dense(nullptr, DType::kF32, 1, 1, 1);
  EXPECT_EQ(ValidateView(v, "keys").code(), StatusCode::kInvalidArgument);
  float x = 0;
  v.data = &x;
  v.shape[1] = -1;
  EXPECT_NE(ValidateView(v, "keys").message().find("keys: shape[1]"), std::string::npos);
  v = TensorView::Dense(&x, DType::kF32, int64_t{1} << 40, int64_t{1} << 40, 1);
  EXPECT_FALSE(ValidateView(v, "keys").ok());
}

}  // namespace
}  // namespace kvstream
