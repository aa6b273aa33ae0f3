#include "http2_test_util.h"

#include <string>

namespace uxds::http2::testing {
namespace {

size_t MetadataNumber(const ServerCall& call, std::string_view key, size_t fallback) {
  const std::string* value = FindMetadata(call.request_metadata(), key);
  return value ? std::stoul(*value) : fallback;
}

}  // namespace

std::shared_ptr<ServiceRegistry> MakeTestService(ServiceProbe& probe) {
  auto registry = std::make_shared<ServiceRegistry>();
  registry->Register("/test.Echo/Unary",
                     MakeUnaryHandler([&probe](ServerCall& call,
                                               std::string request) -> Task<StatusOr<std::string>> {
                       ++probe.handlers_started;
                       probe.last_request_metadata = call.request_metadata();
                       probe.last_authority = call.authority();
                       probe.last_deadline = call.deadline();
                       probe.last_connection = call.connection();
                       probe.last_content_type = call.content_type();
                       co_return request;
                     }));
  registry->Register("/test.Echo/Bidi", [&probe](ServerCall& call) -> Task<Status> {
    ++probe.handlers_started;
    while (std::optional<std::string> message = co_await call.Read()) {
      ++probe.messages_read;
      if (Status written = co_await call.Write(*message); !written.ok()) co_return written;
    }
    if (call.cancelled()) {
      ++probe.handlers_cancelled;
      co_return CancelledError("cancelled");
    }
    ++probe.handlers_finished;
    co_return OkStatus();
  });
  registry->Register("/test.Echo/Hold", [&probe](ServerCall& call) -> Task<Status> {
    ++probe.handlers_started;
    probe.last_deadline = call.deadline();
    Status waited = co_await probe.release.Wait();
    if (!waited.ok() || call.cancelled()) {
      ++probe.handlers_cancelled;
      co_return CancelledError("hold cancelled");
    }
    ++probe.handlers_finished;
    co_return OkStatus();
  });
  registry->Register("/test.Echo/ReadLater", [&probe](ServerCall& call) -> Task<Status> {
    ++probe.handlers_started;
    const Status awaited = co_await probe.release.Wait();
    if (!awaited.ok()) {
      ++probe.handlers_cancelled;
      co_return CancelledError("cancelled");
    }
    while (std::optional<std::string> message = co_await call.Read()) {
      ++probe.messages_read;
      probe.bytes_read += message->size();
    }
    if (call.cancelled()) {
      ++probe.handlers_cancelled;
      co_return CancelledError("cancelled");
    }
    ++probe.handlers_finished;
    co_return co_await call.Write(std::to_string(probe.bytes_read));
  });
  registry->Register("/test.Echo/Flood", [&probe](ServerCall& call) -> Task<Status> {
    ++probe.handlers_started;
    const size_t count = MetadataNumber(call, "x-count", 1);
    const size_t size = MetadataNumber(call, "x-size", 1);
    for (size_t i = 0; i < count; ++i) {
      Status written = co_await call.Write(std::string(size, static_cast<char>('a' + i % 26)));
      if (!written.ok()) {
        ++probe.handlers_cancelled;
        co_return written;
      }
      ++probe.messages_written;
    }
    ++probe.handlers_finished;
    co_return OkStatus();
  });
  registry->Register("/test.Echo/Status", [&probe](ServerCall& call) -> Task<Status> {
    ++probe.handlers_started;
    call.AddTrailingMetadata("x-trailer", "present");
    const std::string* message = FindMetadata(call.request_metadata(), "x-message");
    if (message == nullptr) message = FindMetadata(call.request_metadata(), "x-message-bin");
    std::string text;
    if (message != nullptr) text = *message;
    co_return Status(StatusCodeFromInt(static_cast<int>(MetadataNumber(call, "x-code", 0))),
                     std::move(text));
  });
  registry->Register("/test.Echo/Large", [&probe](ServerCall& call) -> Task<Status> {
    ++probe.handlers_started;
    while (std::optional<std::string> message = co_await call.Read()) {
      probe.bytes_read += message->size();
    }
    Status written = co_await call.Write(std::string(MetadataNumber(call, "x-size", 0), 'L'));
    if (!written.ok()) ++probe.handlers_cancelled;
    co_return written;
  });
  registry->Register("/test.Echo/Metadata", [&probe](ServerCall& call) -> Task<Status> {
    ++probe.handlers_started;
    probe.last_request_metadata = call.request_metadata();
    for (const auto& [key, value] : call.request_metadata()) {
      if (key.rfind("x-echo-", 0) != 0) continue;
      call.AddInitialMetadata(key, value);
      call.AddTrailingMetadata(key, value);
    }
    // Headers go out before any message: the client can wait for them.
    const Status sent = call.SendInitialMetadata();
    if (!sent.ok()) co_return sent;
    while (std::optional<std::string> request = co_await call.Read()) {
    }
    co_return co_await call.Write("ok");
  });
  registry->Register("/test.Echo/FailAfter", [&probe](ServerCall& call) -> Task<Status> {
    ++probe.handlers_started;
    const Status one = co_await call.Write("one");
    if (!one.ok()) co_return one;
    const Status two = co_await call.Write("two");
    if (!two.ok()) co_return two;
    co_return Status(StatusCode::kAborted, "failed after two messages");
  });
  return registry;
}

Task<bool> WaitUntil(Loop& loop, std::function<bool()> condition, std::chrono::milliseconds limit) {
  const auto deadline = Loop::Clock::now() + limit;
  while (!condition()) {
    if (Loop::Clock::now() >= deadline) co_return false;
    const Status awaited = co_await SleepFor(loop, std::chrono::milliseconds(1));
    if (!awaited.ok()) co_return false;
  }
  co_return true;
}

Task<void> RunChecksThenJoin(TaskGroup& group, std::function<Task<void>()> checks) {
  co_await checks();
  co_await group.CancelAndJoin();
}

void Http2Test::SetUp() {
  StatusOr<std::unique_ptr<Loop>> loop = Loop::Create();
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();
  loop_ = std::move(*loop);
  probe_ = std::make_unique<ServiceProbe>(*loop_);
  registry_ = MakeTestService(*probe_);
}

void Http2Test::TearDown() {
  server_.reset();
  probe_.reset();
  registry_.reset();
  loop_.reset();
}

void Http2Test::RunWithServer(std::function<Task<void>()> body, ServerOptions options) {
  StatusOr<std::unique_ptr<Server>> server =
      Server::Listen(*loop_, SocketAddress::Loopback4(0), registry_, std::move(options));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  server_ = std::move(*server);
  auto run = [this, &body]() -> Task<void> {
    TaskGroup group(*loop_);
    group.Spawn(server_->Serve());
    co_await body();
    // Every test ends its calls; anything left is cancelled here.
    co_await server_->Shutdown(std::chrono::milliseconds(100));
    co_await group.Join();
  };
  loop_->BlockOn(run());
}

Task<StatusOr<std::unique_ptr<ClientConnection>>> Http2Test::Connect(
    ClientConnectionOptions options) {
  co_return co_await ClientConnection::Connect(*loop_, server_address(), std::move(options));
}

}  // namespace uxds::http2::testing
