#include "apps/secret_file.h"

#include <fstream>
#include <stdexcept>

namespace atp::apps {

std::string read_secret_file(const std::string& path, const std::string& what) {
  if (path.empty()) return {};
  std::ifstream in(path);
  std::string secret;
  if (!in || !std::getline(in, secret) || secret.size() < 16)
    throw std::invalid_argument(path + ": the " + what +
                                " file must hold one line of at least 16 characters");
  return secret;
}

}  // namespace atp::apps
