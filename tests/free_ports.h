#pragma once
// Loopback UDP ports for tests that write them into a cluster file before anything binds them.
// They are drawn below the kernel's ephemeral range (32768 and up by default): a test running
// beside this one that binds port 0 never gets such a port, so it stays free between the probe
// and the daemon's bind, and between a worker's close and its relaunch's bind (with ephemeral
// probes it did not, twice). Never the same port twice in one process.
#include <cstdint>
#include <random>
#include <set>
#include <system_error>

#include "runtime/udp_socket.h"

namespace atp::testing {

inline bool bindable(std::uint16_t port) {
  try {
    runtime::UdpSocket probe(runtime::Endpoint{0x7F000001, port});
    return true;
  } catch (const std::system_error&) {
    return false;
  }
}

// `count` consecutive free ports; returns the first.
inline std::uint16_t free_ports(std::uint16_t count) {
  static std::mt19937 pick(std::random_device{}());
  static std::set<std::uint16_t> given;
  for (;;) {
    const auto p = static_cast<std::uint16_t>(std::uniform_int_distribution<int>(20000, 32000)(pick));
    bool ok = true;
    for (std::uint16_t i = 0; i < count && ok; ++i)
      ok = !given.contains(static_cast<std::uint16_t>(p + i)) && bindable(static_cast<std::uint16_t>(p + i));
    if (!ok) continue;
    for (std::uint16_t i = 0; i < count; ++i) given.insert(static_cast<std::uint16_t>(p + i));
    return p;
  }
}

inline std::uint16_t free_port() { return free_ports(1); }

}  // namespace atp::testing
