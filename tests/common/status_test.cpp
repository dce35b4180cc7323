#include <gtest/gtest.h>

#include "kvstream/status.h"

namespace kvstream {
namespace {

Result<int> ParsePositive(int x) {
  if (x <= 0) return Status::InvalidArgument("x = " + std::to_string(x) + " must be positive");
  return x;
}

Status Doubled(int x, int* out) {
  KVSTREAM_ASSIGN_OR_RETURN(int v, ParsePositive(x));
  *out = 2 * v;
  return Status::Ok();
}

TEST(Status, CarriesCodeAndMessageThroughMacros) {
  int out = 0;
  EXPECT_TRUE(Doubled(3, &out).ok());
  EXPECT_EQ(out, 6);
  Status s = Doubled(-1, &out).WithContext("parsing");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "InvalidArgument: parsing: x = -1 must be positive");
}

TEST(Result, FromOkStatusIsAnInternalError) {
  Result<int> r(Status::Ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace kvstream
