#include "runtime/control_auth.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <system_error>

namespace atp::runtime::control_auth {

namespace {

std::string hex(const unsigned char* bytes, std::size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * size, '0');
  for (std::size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return out;
}

bool is_hex(std::string_view s) {
  return std::ranges::all_of(s, [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string_view role_name(Role role) {
  switch (role) {
    case Role::server: return "atp-control server";
    case Role::client: return "atp-control client";
    case Role::request: return "atp-control request";
    case Role::answer: return "atp-control answer";
  }
  return "";
}

}  // namespace

std::string fresh_nonce() {
  std::array<unsigned char, kNonceChars / 2> bytes{};
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::getrandom(bytes.data() + done, bytes.size() - done, 0);
    if (n < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "getrandom");
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  return hex(bytes.data(), bytes.size());
}

std::string mac(std::string_view secret, Role role, std::string_view address,
                std::string_view caller_nonce, std::string_view daemon_nonce, std::string_view body) {
  // Each part ends with a newline, and none but the body holds one: the parts cannot be
  // shifted into one another.
  std::string message;
  for (std::string_view part : {role_name(role), address, caller_nonce, daemon_nonce}) {
    message.append(part);
    message.push_back('\n');
  }
  message.append(body);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &size) == nullptr)
    throw std::runtime_error("HMAC-SHA256 failed");
  return hex(digest, size);
}

bool verify(std::string_view presented, std::string_view secret, Role role, std::string_view address,
            std::string_view caller_nonce, std::string_view daemon_nonce, std::string_view body) {
  const std::string expected = mac(secret, role, address, caller_nonce, daemon_nonce, body);
  return presented.size() == expected.size() &&
         CRYPTO_memcmp(presented.data(), expected.data(), expected.size()) == 0;
}

std::string nonce_of_hello(std::string_view line) {
  if (!line.starts_with(kHello)) return {};
  const std::string_view nonce = line.substr(kHello.size());
  return nonce.size() == kNonceChars && is_hex(nonce) ? std::string(nonce) : std::string();
}

std::string socket_address(int fd, bool local) {
  sockaddr_in a{};
  socklen_t size = sizeof a;
  const int got = local ? ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size)
                        : ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &size);
  if (got != 0 || a.sin_family != AF_INET) return {};
  char ip[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

}  // namespace atp::runtime::control_auth
