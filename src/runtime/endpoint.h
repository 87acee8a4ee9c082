#pragma once
// An IPv4 UDP endpoint ("host:port"), and the book that maps endpoints to the NodeIds engines use.
#include <netinet/in.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engines/common.h"

namespace atp::runtime {

struct Endpoint {
  std::uint32_t ip = 0;    // host order
  std::uint16_t port = 0;  // host order

  // "a.b.c.d:port"; nullopt on anything else.
  static std::optional<Endpoint> parse(std::string_view text);
  // Like parse, but throws std::invalid_argument naming `what`.
  static Endpoint parse_or_throw(std::string_view text, std::string_view what);
  static Endpoint from(const sockaddr_in& a);
  sockaddr_in sockaddr() const;
  std::string str() const;
  std::uint64_t key() const { return (std::uint64_t{ip} << 16) | port; }
  bool operator==(const Endpoint&) const = default;
};

// NodeIds for endpoints, handed out in order of first sight; the ids of forgotten endpoints are
// handed out again, so a book that lives as long as a daemon stays as small as what it serves.
class AddressBook {
 public:
  NodeId id_of(const Endpoint& e);
  std::optional<NodeId> find(const Endpoint& e) const;
  const Endpoint& endpoint(NodeId id) const { return endpoints_[id]; }
  // Endpoints known now.
  std::size_t size() const { return ids_.size(); }
  // Forgets every endpoint whose id is not in `kept` (ids not in the book are ignored).
  void keep_only(const std::vector<NodeId>& kept);

 private:
  std::vector<Endpoint> endpoints_;  // by id; a forgotten id's entry is stale until reused
  std::unordered_map<std::uint64_t, NodeId> ids_;
  std::vector<NodeId> free_ids_;
};

}  // namespace atp::runtime
