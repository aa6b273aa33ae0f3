// The README's minimal xDS config (docs/examples/minimal): its four
// resource files served by `uxds control-plane`, its bootstrap, and a call
// through them with `uxds call` reaching a TestService backend. Only the
// ports change: the backend's and the control plane's are picked here.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "http2/server.h"
#include "support/test_support.h"
#include "test_service/test_service.h"
#include "tool_run.h"
#include "uxds/runtime.h"

#ifndef UXDS_TOOL_PATH
#error "UXDS_TOOL_PATH: the uxds binary (tests/tools/meson.build)"
#endif

namespace uxds::testing {
namespace {

using json = nlohmann::json;

std::string Replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(MinimalConfigTest, TheReadmeConfigServesACall) {
  const std::string example = SourceRoot() + "/docs/examples/minimal";
  auto backends = *LoopThread::Start();
  std::unique_ptr<http2::Server> server;
  backends->RunSync([&] {
    auto services = std::make_shared<http2::ServiceRegistry>();
    test_service::RegisterTestService(*services, "greeter", "greeter-host");
    server =
        std::move(*http2::Server::Listen(backends->loop(), SocketAddress::Loopback4(0), services));
    backends->loop().Spawn(server->Serve());
  });
  TempDir dir;
  const std::string resources = dir.File("xds");
  std::filesystem::create_directory(resources);
  for (const char* name : {"listener.json", "route.json", "cluster.json"}) {
    WriteFile(resources + "/" + name, ReadFile(example + "/xds/" + name));
  }
  WriteFile(resources + "/endpoints.json", Replaced(ReadFile(example + "/xds/endpoints.json"),
                                                    "50051", std::to_string(server->port())));

  Subprocess cp = Subprocess::Start(
      {UXDS_TOOL_PATH, "control-plane", "--dir", resources, "--listen", "127.0.0.1:0"});
  std::optional<std::string> listening = cp.ReadLine(std::chrono::seconds(30));
  ASSERT_TRUE(listening.has_value());
  const json event = json::parse(*listening);
  ASSERT_EQ(event["event"], "listening") << *listening;
  const std::string bootstrap = dir.File("bootstrap.json");
  WriteFile(bootstrap, Replaced(ReadFile(example + "/bootstrap.json"), "127.0.0.1:18000",
                                event["address"].get<std::string>()));

  ToolRun call = RunTool(UXDS_TOOL_PATH, {"call", "--bootstrap", bootstrap, "-n", "3",
                                          "--wait-for-ready", "xds:///greeter"});
  EXPECT_EQ(call.exit_code, 0);
  ASSERT_EQ(call.lines.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(json::parse(call.lines[i])["status"], "OK") << call.lines[i];
  }

  cp.Signal(SIGTERM);
  EXPECT_EQ(cp.Wait(), 0);
  std::promise<void> stopped;
  backends->RunSync([&] {
    auto stop = [](http2::Server* s, std::promise<void>* done) -> Task<void> {
      co_await s->Shutdown(std::chrono::milliseconds(0));
      done->set_value();
    };
    backends->loop().Spawn(stop(server.get(), &stopped));
  });
  stopped.get_future().wait();
  backends->RunSync([&] { server.reset(); });
}

}  // namespace
}  // namespace uxds::testing
