#pragma once
// Secrets the tools read from files (never from their command lines, which every user of the
// host can see): the controller's operator and admission credentials, the daemons' control
// secret.
#include <string>

namespace atp::apps {

// The file's first line; throws std::invalid_argument unless it has at least 16 characters.
// An empty path gives an empty secret (none configured).
std::string read_secret_file(const std::string& path, const std::string& what);

}  // namespace atp::apps
