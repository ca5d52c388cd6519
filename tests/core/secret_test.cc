// Tokens (core/secret.h): 128 random bits as 32 hex digits, never the same
// twice; compared whole (a prefix, a longer string or an empty secret is no match).
#include <gtest/gtest.h>

#include <set>

#include "core/secret.h"

namespace hydrozoa {
namespace {

TEST(Secret, TokensAreFreshHexAndComparedWhole) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string t = newToken();
    ASSERT_EQ(t.size(), 32u);
    ASSERT_EQ(t.find_first_not_of("0123456789abcdef"), std::string::npos) << t;
    ASSERT_TRUE(seen.insert(t).second);
  }
  const std::string t = newToken();
  EXPECT_TRUE(sameSecret(t, t));
  EXPECT_FALSE(sameSecret(t.substr(0, 31), t));
  EXPECT_FALSE(sameSecret(t + "0", t));
  std::string flipped = t;
  flipped[31] = flipped[31] == 'a' ? 'b' : 'a';
  EXPECT_FALSE(sameSecret(flipped, t));
  EXPECT_FALSE(sameSecret("", ""));
}

}  // namespace
}  // namespace hydrozoa
