// A loopback HTTP/2 server, on its own thread, that answers every request
// with gRPC response HEADERS and then a scripted body it never ends: the
// control plane that sends an endless response, for fault tests. Requests
// are read and ignored.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

namespace uxds::testing {

class ScriptedGrpcServer {
 public:
  // The body is one gRPC message prefix declaring `declared_length` bytes,
  // then all but the last of them: a message that never completes.
  static std::unique_ptr<ScriptedGrpcServer> UnfinishedMessage(uint32_t declared_length);
  // The body is `message`, gRPC-framed, again and again for as long as the
  // client's flow control lets it through.
  static std::unique_ptr<ScriptedGrpcServer> EndlessRepeat(const std::string& message);

  ~ScriptedGrpcServer();  // closes every connection and joins the thread
  ScriptedGrpcServer(const ScriptedGrpcServer&) = delete;
  ScriptedGrpcServer& operator=(const ScriptedGrpcServer&) = delete;

  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  uint64_t connections() const { return connections_.load(); }
  uint64_t streams() const { return streams_.load(); }
  uint64_t body_bytes_sent() const { return body_bytes_sent_.load(); }

  struct Connection;  // one client's nghttp2 session (implementation)

 private:
  friend struct ScriptedGrpcServerCallbacks;
  explicit ScriptedGrpcServer(std::string body, bool repeat);
  void Run();
  bool Serve(Connection& connection, short revents);  // false: done with it

  const std::string body_;  // what every stream sends (or repeats)
  const bool repeat_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd the destructor signals
  uint16_t port_ = 0;
  std::atomic<uint64_t> connections_{0};
  std::atomic<uint64_t> streams_{0};
  std::atomic<uint64_t> body_bytes_sent_{0};
  std::thread thread_;
};

}  // namespace uxds::testing
