#pragma once
// How a daemon's TCP control and its callers prove to each other that they hold the control
// secret without sending it (issue 49 item 2): each side draws a fresh nonce and answers the
// other's with an HMAC-SHA256 over both nonces and the daemon's address; the request and the
// answer each carry a MAC of their own bytes. One connection, one request:
//
//   caller -> daemon   "ATP-AUTH1 <caller nonce>\n"
//   daemon -> caller   "<daemon nonce> <MAC server>\n"         caller checks it, or sends nothing
//   caller -> daemon   "<MAC client> <MAC request> <request JSON>\n"
//                      the daemon checks MAC client on the line's first 65 bytes, before it
//                      reads (let alone parses) the rest: a peer without the secret gets no
//                      further than that, whatever it sends (item 4)
//   daemon -> caller   "<MAC answer> <answer JSON>\n"
//
// The address is the daemon's IP:port as the connection sees it (the daemon's local address,
// the caller's peer address): a listener that relays the handshake to another daemon sharing
// the secret gets a proof for that daemon's address, which the caller refuses. Nonces are 128
// bits and MACs 256, both in lowercase hex. Requests travel in the clear: a job's wire token in
// an admission is one every data packet of the job carries anyway (docs/reliability.md).
#include <string>
#include <string_view>

namespace atp::runtime::control_auth {

inline constexpr std::string_view kHello = "ATP-AUTH1 ";
inline constexpr std::size_t kNonceChars = 32;
inline constexpr std::size_t kMacChars = 64;
// The most a daemon reads of a connection before the peer proved the secret: the hello line
// and the client MAC with its space.
inline constexpr std::size_t kHelloLineBytes = kHello.size() + kNonceChars + 1;
inline constexpr std::size_t kProofBytes = kMacChars + 1;

enum class Role { server, client, request, answer };

// 128 random bits from the OS, as hex.
std::string fresh_nonce();
// HMAC-SHA256 with `secret` over the role, the daemon's address, both nonces and `body`.
std::string mac(std::string_view secret, Role role, std::string_view address,
                std::string_view caller_nonce, std::string_view daemon_nonce,
                std::string_view body = {});
// Whether `presented` is that MAC (compared in constant time).
bool verify(std::string_view presented, std::string_view secret, Role role,
            std::string_view address, std::string_view caller_nonce,
            std::string_view daemon_nonce, std::string_view body = {});
// The caller nonce of a hello line (without its newline), or "" if it is not one.
std::string nonce_of_hello(std::string_view line);

// A connected socket's own address (local) or its peer's, as "a.b.c.d:port" ("" if not IPv4).
std::string socket_address(int fd, bool local);

}  // namespace atp::runtime::control_auth
