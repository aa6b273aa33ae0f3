#include "support/unfinished_messages_client.h"

#include <netinet/in.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string_view>

namespace uxds::testing {

// nghttp2's callbacks, with the client as user data.
struct UnfinishedMessagesClientCallbacks {
  static UnfinishedMessagesClient& Self(void* user) {
    return *static_cast<UnfinishedMessagesClient*>(user);
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame*, const uint8_t* name, size_t namelen,
                      const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    if (std::string_view(reinterpret_cast<const char*>(name), namelen) == "grpc-status" &&
        std::string_view(reinterpret_cast<const char*>(value), valuelen) == "8") {
      ++Self(user).resource_exhausted_;
    }
    return 0;
  }

  static ssize_t Send(nghttp2_session*, const uint8_t* data, size_t length, int, void* user) {
    size_t done = 0;
    while (done < length) {
      const ssize_t n = ::send(Self(user).fd_, data + done, length - done, MSG_NOSIGNAL);
      if (n <= 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
      done += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(length);
  }

  static ssize_t ReadBody(nghttp2_session*, int32_t stream_id, uint8_t* buf, size_t length,
                          uint32_t*, nghttp2_data_source*, void* user) {
    UnfinishedMessagesClient& self = Self(user);
    const bool unfinished = self.body_ == UnfinishedMessagesClient::Body::kUnfinished;
    const uint32_t declared = unfinished ? UnfinishedMessagesClient::kDeclaredLength
                                         : UnfinishedMessagesClient::kSmallMessageLength;
    size_t& sent = self.sent_per_stream_[static_cast<size_t>(stream_id)];
    std::memset(buf, 0, length);
    for (size_t i = 0; i < length; ++i) {
      const size_t at = (sent + i) % (size_t{declared} + 5);  // within its frame
      if (at >= 1 && at <= 4) buf[i] = static_cast<uint8_t>(declared >> (8 * (4 - at)));
    }
    // An unfinished message never gets its last byte; complete ones never end.
    const size_t n = unfinished ? std::min(length, size_t{declared} + 5 - 1 - sent) : length;
    sent += n;
    self.data_sent_ += n;
    if (n == 0) return NGHTTP2_ERR_DEFERRED;
    return static_cast<ssize_t>(n);
  }
};

UnfinishedMessagesClient::~UnfinishedMessagesClient() {
  if (fd_ >= 0) ::close(fd_);
}

bool UnfinishedMessagesClient::Run(uint16_t port, const std::atomic<bool>* stop) {
  using C = UnfinishedMessagesClientCallbacks;
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return false;
  }
  nghttp2_session_callbacks* callbacks;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_send_callback(callbacks, C::Send);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, C::OnHeader);
  nghttp2_session* session;
  nghttp2_session_client_new(&session, callbacks, this);
  nghttp2_session_callbacks_del(callbacks);
  nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, nullptr, 0);
  auto nv = [](const char* n, const char* v) {
    return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(n)),
                      reinterpret_cast<uint8_t*>(const_cast<char*>(v)), std::strlen(n),
                      std::strlen(v), NGHTTP2_NV_FLAG_NONE};
  };
  const nghttp2_nv headers[] = {nv(":method", "POST"),
                                nv(":scheme", "http"),
                                nv(":path", path_.c_str()),
                                nv(":authority", "hostile"),
                                nv("content-type", "application/grpc"),
                                nv("te", "trailers")};
  nghttp2_data_provider body{};
  body.read_callback = C::ReadBody;
  for (int i = 0; i < streams_; ++i) {
    nghttp2_submit_request(session, nullptr, headers, std::size(headers), &body, nullptr);
  }
  auto last_progress = std::chrono::steady_clock::now();
  size_t last_sent = 0;
  std::vector<uint8_t> in(64 * 1024);
  while (stop != nullptr
             ? !stop->load()
             : std::chrono::steady_clock::now() - last_progress < std::chrono::milliseconds(500)) {
    if (nghttp2_session_send(session) != 0) break;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 20) > 0) {
      const ssize_t n = ::recv(fd_, in.data(), in.size(), 0);
      if (n <= 0) break;
      if (nghttp2_session_mem_recv(session, in.data(), static_cast<size_t>(n)) < 0) break;
      // New credit may have arrived: let every stream try again.
      for (int32_t id = 1; id <= 2 * streams_; id += 2) nghttp2_session_resume_data(session, id);
    }
    if (data_sent_ != last_sent) {
      last_sent = data_sent_;
      last_progress = std::chrono::steady_clock::now();
    }
    if (stop == nullptr && data_sent_ > size_t{512} * 1024 * 1024) break;  // clearly unbounded
  }
  nghttp2_session_del(session);
  return true;
}

}  // namespace uxds::testing
