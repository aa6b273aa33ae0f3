// A client that sends random and half-valid HTTP/2 frames: the server must
// close such connections (or ignore what is harmless), never crash, and keep
// serving everyone else. Deterministic (fixed seeds) so a failure replays.
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <random>
#include <string>
#include <vector>

#include "http2_test_util.h"
#include "runtime/tcp_socket.h"

namespace uxds::http2::testing {
namespace {

using std::chrono::milliseconds;

constexpr std::string_view kClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

void AppendFrame(std::string& out, uint8_t type, uint8_t flags, uint32_t stream_id,
                 std::string_view payload) {
  const size_t n = payload.size();
  const char header[9] = {static_cast<char>(n >> 16),
                          static_cast<char>(n >> 8),
                          static_cast<char>(n),
                          static_cast<char>(type),
                          static_cast<char>(flags),
                          static_cast<char>(stream_id >> 24),
                          static_cast<char>(stream_id >> 16),
                          static_cast<char>(stream_id >> 8),
                          static_cast<char>(stream_id)};
  out.append(header, sizeof header);
  out.append(payload);
}

// Header fields a request might carry, valid and not.
const std::pair<const char*, const char*> kFieldPool[] = {
    {":method", "POST"},
    {":method", "GET"},
    {":scheme", "http"},
    {":path", "/test.Echo/Unary"},
    {":path", "/test.Echo/Bidi"},
    {":path", "/test.Echo/Hold"},
    {":path", ""},
    {":authority", "x"},
    {"content-type", "application/grpc"},
    {"content-type", "text/plain"},
    {"te", "trailers"},
    {"te", "gzip"},
    {"grpc-timeout", "1m"},
    {"grpc-timeout", "nonsense"},
    {"grpc-encoding", "gzip"},
    {"x-bin", "!!notbase64"},
    {"connection", "keep-alive"},
    {"Upper-Case", "v"},
    {"content-length", "3"},
    {":status", "200"},
};

// A HEADERS block of random fields, properly HPACK-encoded.
std::string RandomHeaderBlock(std::mt19937& rng, nghttp2_hd_deflater* deflater) {
  std::vector<nghttp2_nv> nva;
  auto add = [&](const char* name, const char* value) {
    nva.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(name)),
                   reinterpret_cast<uint8_t*>(const_cast<char*>(value)), strlen(name),
                   strlen(value), NGHTTP2_NV_FLAG_NONE});
  };
  if (rng() % 2 == 0) {
    // A valid gRPC request, plus a few random fields: reaches the handlers.
    static const char* const kPaths[] = {"/test.Echo/Unary", "/test.Echo/Bidi", "/test.Echo/Hold",
                                         "/test.Echo/ReadLater"};
    add(":method", "POST");
    add(":scheme", "http");
    add(":path", kPaths[rng() % std::size(kPaths)]);
    add(":authority", "hostile");
    add("content-type", "application/grpc");
  }
  const int count = static_cast<int>(rng() % 4);
  for (int i = 0; i < count; ++i) {
    const auto& [name, value] = kFieldPool[rng() % std::size(kFieldPool)];
    add(name, value);
  }
  std::string block(nghttp2_hd_deflate_bound(deflater, nva.data(), nva.size()), '\0');
  const ssize_t n = nghttp2_hd_deflate_hd(deflater, reinterpret_cast<uint8_t*>(block.data()),
                                          block.size(), nva.data(), nva.size());
  block.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return block;
}

std::string RandomBytes(std::mt19937& rng, size_t max) {
  std::string s(rng() % (max + 1), '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// A gRPC message prefix that is sometimes sane and sometimes not.
std::string RandomGrpcData(std::mt19937& rng) {
  std::string s;
  s.push_back(static_cast<char>(rng() % 3));  // flag 0, 1 or 2
  const uint32_t length = (rng() % 2) ? rng() % 16 : rng();
  for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>(length >> shift));
  s += RandomBytes(rng, 20);
  return s;
}

// Preface, SETTINGS, then `frames` frames that are plausible but random.
std::string HostileConnectionBytes(uint32_t seed) {
  std::mt19937 rng(seed);
  nghttp2_hd_deflater* deflater = nullptr;
  nghttp2_hd_deflate_new(&deflater, 4096);
  std::string out(kClientPreface);
  AppendFrame(out, 4, 0, 0, "");  // SETTINGS
  const int frames = 1 + static_cast<int>(rng() % 12);
  for (int i = 0; i < frames; ++i) {
    const uint32_t stream_id = (rng() % 4 == 0) ? rng() % 8 : 1 + 2 * (rng() % 3);
    const uint8_t flags = static_cast<uint8_t>((rng() % 3 == 0) ? rng() : (rng() % 2) | 4);
    switch (rng() % 7) {
      case 0:
      case 1:
        AppendFrame(out, 1, flags, stream_id, RandomHeaderBlock(rng, deflater));  // HEADERS
        break;
      case 2:
        AppendFrame(out, 0, flags & 1, stream_id, RandomGrpcData(rng));  // DATA
        break;
      case 3:
        AppendFrame(out, 3, 0, stream_id, RandomBytes(rng, 6));  // RST_STREAM, any size
        break;
      case 4:
        AppendFrame(out, 8, 0, stream_id, RandomBytes(rng, 5));  // WINDOW_UPDATE
        break;
      case 5:
        AppendFrame(out, static_cast<uint8_t>(rng() % 12), flags, stream_id,
                    RandomBytes(rng, 40));  // any frame type
        break;
      default:
        out += RandomBytes(rng, 30);  // not even a frame
        break;
    }
  }
  nghttp2_hd_deflate_del(deflater);
  return out;
}

TEST_F(Http2Test, HostileFramesNeverCrashTheServer) {
  RunWithServer([&]() -> Task<void> {
    auto healthy = co_await Connect();
    CO_ASSERT_OK(healthy);
    for (uint32_t seed = 1; seed <= 500; ++seed) {
      auto raw = co_await TcpSocket::Connect(*loop_, server_address(), milliseconds(5000));
      CO_ASSERT_OK(raw);
      const std::string bytes = HostileConnectionBytes(seed);
      const Status wrote = co_await (*raw)->Write(
          std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
      (void)wrote;  // the server may already have closed on us
      // Read whatever comes back for a moment, then hang up.
      bool stop = false;
      Timer timer(*loop_);
      timer.Start(milliseconds(5), [&] {
        stop = true;
        (*raw)->Close();
      });
      std::vector<uint8_t> buffer(4096);
      while (!stop) {
        StatusOr<size_t> n = co_await (*raw)->Read(buffer);
        if (!n.ok() || *n == 0) break;
      }
      timer.Cancel();
      (*raw)->Close();
    }
    // Every hostile connection is gone (closed by the server, or after our
    // hang-up); only the healthy one remains.
    EXPECT_TRUE(co_await WaitUntil(*loop_, [&] { return server_->connection_count() == 1; }))
        << server_->connection_count() << " connections left";
    StatusOr<std::string> echoed = co_await UnaryCall(**healthy, "/test.Echo/Unary", "alive");
    CO_ASSERT_OK(echoed);
    EXPECT_EQ(*echoed, "alive");
    // Some hostile requests were well-formed enough to reach a handler.
    EXPECT_GT(probe_->handlers_started, 1);
    co_await (*healthy)->Close();
  });
}

}  // namespace
}  // namespace uxds::http2::testing
