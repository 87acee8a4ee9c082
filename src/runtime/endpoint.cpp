#include "runtime/endpoint.h"

#include <arpa/inet.h>

#include <charconv>
#include <stdexcept>

namespace atp::runtime {

std::optional<Endpoint> Endpoint::parse(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::string host(text.substr(0, colon));
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || end != port_text.data() + port_text.size() || port > 65535)
    return std::nullopt;
  in_addr addr{};
  if (inet_pton(AF_INET, host.c_str(), &addr) != 1) return std::nullopt;
  return Endpoint{ntohl(addr.s_addr), static_cast<std::uint16_t>(port)};
}

Endpoint Endpoint::parse_or_throw(std::string_view text, std::string_view what) {
  if (auto e = parse(text)) return *e;
  throw std::invalid_argument(std::string(what) + ": '" + std::string(text) +
                              "' is not an IPv4 address:port");
}

Endpoint Endpoint::from(const sockaddr_in& a) {
  return Endpoint{ntohl(a.sin_addr.s_addr), ntohs(a.sin_port)};
}

sockaddr_in Endpoint::sockaddr() const {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(ip);
  a.sin_port = htons(port);
  return a;
}

std::string Endpoint::str() const {
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 255) + "." +
         std::to_string((ip >> 8) & 255) + "." + std::to_string(ip & 255) + ":" +
         std::to_string(port);
}

NodeId AddressBook::id_of(const Endpoint& e) {
  auto [it, inserted] = ids_.try_emplace(e.key(), static_cast<NodeId>(endpoints_.size()));
  if (inserted) endpoints_.push_back(e);
  return it->second;
}

std::optional<NodeId> AddressBook::find(const Endpoint& e) const {
  auto it = ids_.find(e.key());
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

}  // namespace atp::runtime
