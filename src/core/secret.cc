#include "core/secret.h"

#include <fmt/format.h>

#include <random>

namespace hydrozoa {

std::string newToken() {
  std::random_device rd;
  std::string token;
  for (int i = 0; i < 4; ++i) token += fmt::format("{:08x}", rd());
  return token;
}

bool sameSecret(std::string_view given, std::string_view secret) {
  if (given.size() != secret.size() || secret.empty()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < secret.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ secret[i]);
  return diff == 0;
}

}  // namespace hydrozoa
