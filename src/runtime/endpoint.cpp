#include "runtime/endpoint.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <functional>
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
  if (auto it = ids_.find(e.key()); it != ids_.end()) return it->second;
  NodeId id;
  if (free_ids_.empty()) {
    id = static_cast<NodeId>(endpoints_.size());
    endpoints_.push_back(e);
  } else {
    id = free_ids_.back();
    free_ids_.pop_back();
    endpoints_[id] = e;
  }
  ids_.emplace(e.key(), id);
  return id;
}

void AddressBook::keep_only(const std::vector<NodeId>& kept) {
  std::vector<bool> keep(endpoints_.size(), false);
  for (NodeId id : kept)
    if (id < keep.size()) keep[id] = true;
  for (auto it = ids_.begin(); it != ids_.end();) {
    if (keep[it->second]) {
      ++it;
      continue;
    }
    free_ids_.push_back(it->second);
    it = ids_.erase(it);
  }
  // Lowest ids first: ids stay dense, and below the switch's port limit.
  std::sort(free_ids_.begin(), free_ids_.end(), std::greater<>());
}

std::optional<NodeId> AddressBook::find(const Endpoint& e) const {
  auto it = ids_.find(e.key());
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

}  // namespace atp::runtime
