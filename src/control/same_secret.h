#pragma once
// Comparing secrets (credentials, control secrets) in time that does not depend on where they
// differ, so a caller cannot guess one byte by byte from how fast it is refused.
#include <cstddef>
#include <string_view>

namespace atp::control {

inline bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace atp::control
