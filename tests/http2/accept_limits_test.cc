// The server's accept loop when it cannot take connections: out of
// descriptors (RLIMIT_NOFILE lowered in this process) it logs one line,
// pauses, and resumes as its connections end; at max_connections it closes
// new connections and logs one line. Real clients on loopback sockets.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <string>
#include <vector>

#include "http2_test_util.h"
#include "runtime/tcp_socket.h"
#include "support/test_support.h"
#include "uxds/log.h"

namespace uxds::http2::testing {
namespace {

using std::chrono::milliseconds;
using ::uxds::testing::LogCapture;

constexpr std::string_view kHello =
    "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    "\x00\x00\x00\x04\x00\x00\x00\x00\x00";  // the preface, an empty SETTINGS

// The highest open descriptor, and how many are open.
std::pair<int, int> OpenDescriptors() {
  int highest = -1, count = 0;
  DIR* dir = opendir("/proc/self/fd");
  const int own = dirfd(dir);
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::stoi(entry->d_name);
    if (fd == own) continue;
    highest = std::max(highest, fd);
    ++count;
  }
  closedir(dir);
  return {highest, count};
}

// A blocking connect on loopback, the preface and SETTINGS sent; the
// socket is then non-blocking for the loop.
int ConnectAndGreet(const SocketAddress& address) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, address.sockaddr_ptr(), address.size()) != 0 ||
      ::send(fd, kHello.data(), kHello.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(kHello.size())) {
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

struct Client {
  std::unique_ptr<TcpSocket> socket;
  std::string received;
  bool ended = false;
};

Task<void> ReadUntilEnd(Client& client) {
  std::vector<uint8_t> buffer(4096);
  while (true) {
    StatusOr<size_t> n = co_await client.socket->Read(buffer);
    if (!n.ok() || *n == 0) break;
    client.received.append(reinterpret_cast<const char*>(buffer.data()), *n);
  }
  client.ended = true;
}

// Out of descriptors: 16 clients connect while the process may open only a
// few more. The server accepts what it can, logs one line, pauses, and
// accepts the rest as max_connection_idle closes the first ones: every
// client is served (SETTINGS, then GOAWAY and EOF), none is refused.
TEST_F(Http2Test, OutOfDescriptorsPausesAcceptingAndEveryClientIsServed) {
  constexpr int kClients = 16;
  constexpr int kRoomForServer = 2;
  ServerOptions options;
  options.max_connection_idle = milliseconds(200);
  LogCapture log;
  RunWithServer(
      [&]() -> Task<void> {
        // Free numbers below the highest open descriptor (an inherited fd
        // 255, say) are filled first, so that the limit leaves exactly
        // kClients + kRoomForServer free.
        const int highest = OpenDescriptors().first;
        struct Fillers {
          std::vector<int> fds;
          ~Fillers() {
            for (int fd : fds) ::close(fd);
          }
        } fillers;
        while (true) {
          const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
          CO_ASSERT_TRUE(fd >= 0);
          if (fd > highest) {
            ::close(fd);
            break;
          }
          fillers.fds.push_back(fd);
        }
        // UBSan checks a type the first time it meets it through a pipe(),
        // which fails while descriptors are out: the sink's first call is
        // made now.
        Log(LogSeverity::kInfo, "descriptor limit test starts");
        rlimit saved{};
        getrlimit(RLIMIT_NOFILE, &saved);
        rlimit lowered = saved;
        lowered.rlim_cur = static_cast<rlim_t>(highest + 1 + kClients + kRoomForServer);
        CO_ASSERT_TRUE(setrlimit(RLIMIT_NOFILE, &lowered) == 0);
        struct Restore {
          rlimit saved;
          ~Restore() { setrlimit(RLIMIT_NOFILE, &saved); }
        } restore{saved};

        std::vector<Client> clients(kClients);
        TaskGroup readers(*loop_);
        co_await RunChecksThenJoin(readers, [&]() -> Task<void> {
          for (Client& client : clients) {
            const int fd = ConnectAndGreet(server_address());
            CO_ASSERT_TRUE(fd >= 0);
            client.socket = std::make_unique<TcpSocket>(*loop_, fd);
            readers.Spawn(ReadUntilEnd(client));
          }
          const bool all_ended = co_await WaitUntil(
              *loop_,
              [&] {
                for (const Client& c : clients) {
                  if (!c.ended) return false;
                }
                return true;
              },
              milliseconds(60'000));
          CO_ASSERT_TRUE(all_ended);
          for (const Client& client : clients) {
            // Served: the server's SETTINGS came first (a refused
            // connection gets no byte).
            EXPECT_GE(client.received.size(), 9u);
            if (client.received.size() >= 9) {
              EXPECT_EQ(client.received[3], 0x4);
            }
          }
          EXPECT_GT(server_->accept_errors(), 0u);
          EXPECT_EQ(server_->refused_connections(), 0u);
          const int paused = log.Count("accepting paused until a connection ends");
          EXPECT_GE(paused, 1);
          EXPECT_LE(paused, 6);  // once per 10 s at most
          EXPECT_LT(static_cast<uint64_t>(paused), server_->accept_errors() + 1);
          EXPECT_GE(log.Count("accepting connections again"), 1);
          for (Client& client : clients) client.socket->Close();
        });
      },
      options);
}

// At max_connections each new connection is closed without a byte, and one
// line says so, not one per connection.
TEST_F(Http2Test, MaxConnectionsReachedIsLoggedOnce) {
  ServerOptions options;
  options.max_connections = 1;
  LogCapture log;
  RunWithServer(
      [&]() -> Task<void> {
        auto served = co_await Connect();
        CO_ASSERT_OK(served);
        for (int i = 0; i < 3; ++i) {
          auto refused = co_await TcpSocket::Connect(*loop_, server_address(), milliseconds(5000));
          CO_ASSERT_OK(refused);
          std::vector<uint8_t> buffer(64);
          StatusOr<size_t> n = co_await (*refused)->Read(buffer);
          EXPECT_TRUE(!n.ok() || *n == 0);  // closed, nothing sent
          (*refused)->Close();
        }
        EXPECT_EQ(server_->refused_connections(), 3u);
        EXPECT_EQ(log.Count("max_connections (1) reached"), 1);
        co_await (*served)->Close();
      },
      options);
}

}  // namespace
}  // namespace uxds::http2::testing
