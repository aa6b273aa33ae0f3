#include "address_check.h"

#include <arpa/inet.h>

#include <cctype>
#include <charconv>

#include "cli.h"

namespace uxds::tool {
namespace {

struct HostPort {
  std::string host;
  std::string port;
  bool bracketed = false;
};

// Splits HOST:PORT or [HOST]:PORT; "" on success, else why not.
std::string Split(const std::string& address, HostPort& out) {
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') {
      return "\"" + Printable(address) + "\": expected [IPv6]:PORT";
    }
    out.host = address.substr(1, close - 1);
    out.port = address.substr(close + 2);
    out.bracketed = true;
    return "";
  }
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return "\"" + Printable(address) + "\": missing :PORT";
  out.host = address.substr(0, colon);
  out.port = address.substr(colon + 1);
  if (out.host.find(':') != std::string::npos) {
    return "\"" + Printable(address) + "\": an IPv6 address needs brackets, [IPv6]:PORT";
  }
  return "";
}

// "" when `port` is a number in [min, 65535].
std::string CheckPort(const std::string& address, const std::string& port, unsigned min) {
  unsigned value = 0;
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || error != std::errc() || end != port.data() + port.size() || value < min ||
      value > 65535) {
    return "\"" + Printable(address) + "\": the port must be a number from " + std::to_string(min) +
           " to 65535";
  }
  return "";
}

bool IsIp(const std::string& host, bool bracketed) {
  unsigned char bytes[16];
  if (bracketed) return inet_pton(AF_INET6, host.c_str(), bytes) == 1;
  return inet_pton(AF_INET, host.c_str(), bytes) == 1;
}

// RFC 1123 host names: letters, digits, '-' and '.'.
bool IsDnsName(const std::string& host) {
  if (host.empty() || host.size() > 253 || host.front() == '.' || host.front() == '-') return false;
  for (const char c : host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') return false;
  }
  return true;
}

}  // namespace

std::string CheckListenAddress(const std::string& address) {
  HostPort parts;
  if (std::string error = Split(address, parts); !error.empty()) return error;
  if (!IsIp(parts.host, parts.bracketed)) {
    return "\"" + Printable(address) + "\": \"" + Printable(parts.host) +
           "\" is not an IPv4 address or a bracketed IPv6 one (IP:PORT)";
  }
  return CheckPort(address, parts.port, 0);
}

std::string CheckTargetAddress(const std::string& address) {
  HostPort parts;
  if (std::string error = Split(address, parts); !error.empty()) return error;
  if (!IsIp(parts.host, parts.bracketed) && (parts.bracketed || !IsDnsName(parts.host))) {
    return "\"" + Printable(address) + "\": \"" + Printable(parts.host) +
           "\" is not an IP address or a host name";
  }
  return CheckPort(address, parts.port, 1);
}

}  // namespace uxds::tool
