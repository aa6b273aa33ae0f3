// libFuzzer target: the HTTP/2 server fed raw bytes. Each input is written,
// after the client connection preface, to a fresh loopback connection to an
// in-process http2::Server (one per input) serving a small echo service; the
// fuzzer reads whatever comes back until the server closes or 5 ms pass,
// hangs up, and checks that the connection is gone from the server within a
// second (nothing left behind), then shuts the server down. A crash, a
// sanitizer report or a leak (LeakSanitizer) is a finding.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "http2/server.h"
#include "http2/service_registry.h"
#include "runtime/socket_address.h"
#include "runtime/tcp_socket.h"
#include "uxds/loop.h"
#include "uxds/service_registry.h"

namespace {

using std::chrono::milliseconds;
using uxds::Loop;
using uxds::Task;

void Require(bool property) {
  if (!property) __builtin_trap();
}

constexpr std::string_view kClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

Task<uxds::StatusOr<std::string>> Unary(uxds::ServerCall&, std::string request) {
  co_return request;
}

Task<uxds::Status> Bidi(uxds::ServerCall& call) {
  for (;;) {
    std::optional<std::string> message = co_await call.Read();
    if (!message.has_value()) co_return uxds::Status();
    const uxds::Status written = co_await call.Write(*message);
    if (!written.ok()) co_return written;
  }
}

std::shared_ptr<uxds::ServiceRegistry> EchoService() {
  auto registry = std::make_shared<uxds::ServiceRegistry>();
  registry->Register("/f.Echo/Unary", uxds::MakeUnaryHandler(Unary));
  registry->Register("/f.Echo/Bidi", Bidi);
  return registry;
}

Task<void> WaitGone(Loop& loop, const uxds::http2::Server& server, bool& gone) {
  for (int i = 0; i < 1000 && server.connection_count() != 0; ++i) {
    const uxds::Status slept = co_await uxds::SleepFor(loop, milliseconds(1));
    (void)slept;
  }
  gone = server.connection_count() == 0;
}

Task<void> OneConnection(Loop& loop, uxds::http2::Server& server, std::string bytes) {
  auto raw = co_await uxds::TcpSocket::Connect(loop, uxds::SocketAddress::Loopback4(server.port()),
                                               milliseconds(5000));
  Require(raw.ok());
  uxds::TcpSocket& socket = **raw;
  // The server may close before everything is written: any result will do.
  const uxds::Status wrote = co_await socket.Write(
      std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  (void)wrote;
  bool stop = false;
  uxds::Timer timer(loop);
  timer.Start(milliseconds(5), [&] {
    stop = true;
    socket.Close();
  });
  std::vector<uint8_t> buffer(16384);
  while (!stop) {
    uxds::StatusOr<size_t> n = co_await socket.Read(buffer);
    if (!n.ok() || *n == 0) break;
  }
  timer.Cancel();
  socket.Close();
  bool gone = false;
  co_await WaitGone(loop, server, gone);
  Require(gone);
}

Task<void> ServeOneConnection(Loop& loop, uxds::http2::Server& server, std::string bytes) {
  uxds::TaskGroup group(loop);
  group.Spawn(server.Serve());
  co_await OneConnection(loop, server, std::move(bytes));
  co_await server.Shutdown(milliseconds(10));
  co_await group.Join();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Loop* const loop = [] {
    auto created = Loop::Create();
    Require(created.ok());
    return created->release();  // lives for the whole run
  }();
  static const std::shared_ptr<uxds::ServiceRegistry> registry = EchoService();

  auto server = uxds::http2::Server::Listen(*loop, uxds::SocketAddress::Loopback4(0), registry, {});
  Require(server.ok());
  std::string bytes(kClientPreface);
  bytes.append(reinterpret_cast<const char*>(data), size);
  loop->BlockOn(ServeOneConnection(*loop, **server, std::move(bytes)));
  return 0;
}
