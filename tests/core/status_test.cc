#include "core/status.h"

#include <gtest/gtest.h>

namespace hydrozoa {
namespace {

Result<int> half(int x) {
  if (x % 2) return invalidArgument("odd");
  return x / 2;
}

Result<int> quarter(int x) {
  HZ_ASSIGN_OR_RETURN(int h, half(x));
  return half(h);
}

TEST(Result, PropagatesTheFirstError) {
  EXPECT_EQ(*quarter(8), 2);
  auto r = quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "odd");
}

TEST(Result, ValueOnErrorThrows) {
  auto r = half(3);
  EXPECT_THROW((void)r.value(), std::logic_error);
}

TEST(Status, PrefixKeepsCode) {
  Status s = notFound("x").withPrefix("file.json");
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_EQ(s.message(), "file.json: x");
  EXPECT_TRUE(Status().withPrefix("p").ok());
}

TEST(Check, ThrowsWithFileAndLine) {
  try {
    HZ_CHECK_MSG(1 + 1 == 3, "arithmetic");
    FAIL();
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("status_test.cc"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("arithmetic"), std::string::npos);
  }
}

}  // namespace
}  // namespace hydrozoa
