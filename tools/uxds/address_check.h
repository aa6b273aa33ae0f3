// One rule for the addresses the uxds subcommands take, checked while the
// command line is parsed: a bad one is a usage error (exit 2, one line),
// never a runtime failure after a wait.
//   listen address: IP:PORT, an IPv4 address or a bracketed IPv6 one, port
//                   0..65535 (0: any free port)
//   target address: HOST:PORT, HOST an IP (IPv6 bracketed) or a DNS name,
//                   port 1..65535
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace uxds::tool {

// "" when `address` is a listen address, else what is wrong with it.
std::string CheckListenAddress(const std::string& address);
// "" when `address` is a target address, else what is wrong with it.
std::string CheckTargetAddress(const std::string& address);

inline CLI::Validator ListenAddress() {
  return CLI::Validator([](std::string& value) { return CheckListenAddress(value); }, "IP:PORT");
}
inline CLI::Validator TargetAddress() {
  return CLI::Validator([](std::string& value) { return CheckTargetAddress(value); }, "HOST:PORT");
}

}  // namespace uxds::tool
