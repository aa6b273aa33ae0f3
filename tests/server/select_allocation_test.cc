// FilterChainMatcher::Select allocates nothing: this binary replaces the
// global operator new to count allocations around Select calls.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>
#include <string>

#include "server/filter_chain_matcher.h"
#include "server_listener_protos.h"

namespace {
int allocations = 0;
}  // namespace

void* operator new(std::size_t size) {
  ++allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace uxds::testing {
namespace {

TEST(FilterChainSelectAllocationTest, SelectAllocatesNothing) {
  ListenerProto listener = ServerListenerProto();
  for (int i = 0; i < 50; ++i) {
    auto* match = AddChain(listener, "chain-" + std::to_string(i));
    AddPrefix(*match, "10.0." + std::to_string(i) + ".0/24");
    AddSourcePrefix(*match, "192.168." + std::to_string(i) + ".0/24");
    match->add_source_ports(static_cast<uint32_t>(1000 + i));
  }
  AddPrefix(*AddChain(listener, "v6"), "2001:db8::/32");
  SetDefaultChain(listener);
  auto decoded = DecodeServerListener(listener);
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  const FilterChainMatcher matcher(std::get<ListenerResource::TcpListener>((*decoded)->listener));
  const ConnectionAddresses hit{*SocketAddress::FromIpAndPort("10.0.7.1", 8080),
                                *SocketAddress::FromIpAndPort("192.168.7.9", 1007)};
  const ConnectionAddresses v6{*SocketAddress::FromIpAndPort("2001:db8::1", 8080),
                               *SocketAddress::FromIpAndPort("::ffff:192.168.7.9", 1)};
  const ConnectionAddresses miss{*SocketAddress::FromIpAndPort("172.16.0.1", 8080),
                                 *SocketAddress::FromIpAndPort("127.0.0.1", 1)};

  const int before = allocations;
  const FilterChain* chains[3] = {matcher.Select(hit), matcher.Select(v6), matcher.Select(miss)};
  const int during = allocations - before;

  EXPECT_EQ(during, 0);
  // The counter counts (the string and its buffer).
  auto* heap = new std::string(100, 'x');
  EXPECT_GT(allocations - before, 0);
  delete heap;
  ASSERT_NE(chains[0], nullptr);
  EXPECT_EQ(chains[0]->name, "chain-7");
  ASSERT_NE(chains[1], nullptr);
  EXPECT_EQ(chains[1]->name, "v6");
  ASSERT_NE(chains[2], nullptr);
  EXPECT_EQ(chains[2]->name, "default");
}

}  // namespace
}  // namespace uxds::testing
