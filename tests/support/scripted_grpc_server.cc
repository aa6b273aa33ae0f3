#include "support/scripted_grpc_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <list>
#include <map>
#include <vector>

#include <gtest/gtest.h>

namespace uxds::testing {

struct ScriptedGrpcServer::Connection {
  ScriptedGrpcServer* server = nullptr;
  int fd = -1;
  nghttp2_session* session = nullptr;
  std::map<int32_t, size_t> sent;  // body bytes sent per stream

  ~Connection() {
    if (session != nullptr) nghttp2_session_del(session);
    if (fd >= 0) ::close(fd);
  }
};

namespace {

using Connection = ScriptedGrpcServer::Connection;

std::string Framed(const std::string& message, uint32_t declared_length) {
  std::string out(5, '\0');
  for (int i = 0; i < 4; ++i) out[1 + i] = static_cast<char>(declared_length >> (8 * (3 - i)));
  return out + message;
}

}  // namespace

// nghttp2's callbacks, with the Connection as user data.
struct ScriptedGrpcServerCallbacks {
  static ssize_t Send(nghttp2_session*, const uint8_t* data, size_t length, int, void* user) {
    auto* connection = static_cast<Connection*>(user);
    const ssize_t n = ::send(connection->fd, data, length, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return NGHTTP2_ERR_WOULDBLOCK;
    if (n <= 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
    return n;
  }

  static ssize_t ReadBody(nghttp2_session*, int32_t stream_id, uint8_t* buf, size_t length,
                          uint32_t* flags, nghttp2_data_source*, void* user) {
    auto* connection = static_cast<Connection*>(user);
    ScriptedGrpcServer& server = *connection->server;
    size_t& sent = connection->sent[stream_id];
    const std::string& body = server.body_;
    size_t n = 0;
    while (n < length) {
      const size_t at = server.repeat_ ? sent % body.size() : sent;
      if (at >= body.size()) break;
      const size_t take = std::min(length - n, body.size() - at);
      std::memcpy(buf + n, body.data() + at, take);
      n += take;
      sent += take;
    }
    *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;  // the response never ends
    if (n == 0) return NGHTTP2_ERR_DEFERRED;    // and is never resumed
    server.body_bytes_sent_ += n;
    return static_cast<ssize_t>(n);
  }

  static int OnFrameRecv(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    auto* connection = static_cast<Connection*>(user);
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    ++connection->server->streams_;
    auto nv = [](const char* name, const char* value) {
      return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name)),
                        reinterpret_cast<uint8_t*>(const_cast<char*>(value)), std::strlen(name),
                        std::strlen(value), NGHTTP2_NV_FLAG_NONE};
    };
    const nghttp2_nv headers[] = {nv(":status", "200"), nv("content-type", "application/grpc")};
    nghttp2_data_provider body{};
    body.read_callback = ReadBody;
    nghttp2_submit_response(session, frame->hd.stream_id, headers, std::size(headers), &body);
    return 0;
  }
};

std::unique_ptr<ScriptedGrpcServer> ScriptedGrpcServer::UnfinishedMessage(
    uint32_t declared_length) {
  std::string body = Framed(std::string(declared_length - 1, '\0'), declared_length);
  return std::unique_ptr<ScriptedGrpcServer>(new ScriptedGrpcServer(std::move(body), false));
}

std::unique_ptr<ScriptedGrpcServer> ScriptedGrpcServer::EndlessRepeat(const std::string& message) {
  std::string body = Framed(message, static_cast<uint32_t>(message.size()));
  return std::unique_ptr<ScriptedGrpcServer>(new ScriptedGrpcServer(std::move(body), true));
}

ScriptedGrpcServer::ScriptedGrpcServer(std::string body, bool repeat)
    : body_(std::move(body)), repeat_(repeat) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(listen_fd_, 16) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ADD_FAILURE() << "scripted gRPC server: cannot listen: " << std::strerror(errno);
  }
  port_ = ntohs(addr.sin_port);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { Run(); });
}

ScriptedGrpcServer::~ScriptedGrpcServer() {
  const uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);
  thread_.join();
  ::close(stop_fd_);
  ::close(listen_fd_);
}

void ScriptedGrpcServer::Run() {
  nghttp2_session_callbacks* callbacks = nullptr;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_send_callback(callbacks, ScriptedGrpcServerCallbacks::Send);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks,
                                                       ScriptedGrpcServerCallbacks::OnFrameRecv);
  std::list<Connection> connections;
  for (;;) {
    std::vector<pollfd> fds = {{stop_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (Connection& connection : connections) {
      const short events = POLLIN | (nghttp2_session_want_write(connection.session) ? POLLOUT : 0);
      fds.push_back({connection.fd, events, 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) break;
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        const int one = 1;  // small frames go out at once, as a real server's
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        Connection& connection = connections.emplace_back();
        connection.server = this;
        connection.fd = fd;
        nghttp2_session_server_new(&connection.session, callbacks, &connection);
        nghttp2_submit_settings(connection.session, NGHTTP2_FLAG_NONE, nullptr, 0);
        ++connections_;
      }
    }
    // fds[2...] follow `connections` in order; new ones wait for the next poll.
    size_t i = 2;
    for (auto it = connections.begin(); it != connections.end() && i < fds.size(); ++i) {
      it = Serve(*it, fds[i].revents) ? std::next(it) : connections.erase(it);
    }
  }
  connections.clear();
  nghttp2_session_callbacks_del(callbacks);
}

bool ScriptedGrpcServer::Serve(Connection& connection, short revents) {
  if (revents & (POLLIN | POLLHUP | POLLERR)) {
    uint8_t buffer[16 * 1024];
    for (;;) {
      const ssize_t n = ::recv(connection.fd, buffer, sizeof buffer, 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) return false;  // the client left
      if (nghttp2_session_mem_recv(connection.session, buffer, static_cast<size_t>(n)) < 0) {
        return false;
      }
    }
  }
  if (nghttp2_session_send(connection.session) != 0) return false;
  return nghttp2_session_want_read(connection.session) ||
         nghttp2_session_want_write(connection.session);
}

}  // namespace uxds::testing
