// A gRPC C++ (Debian's 1.51) grpc.testing.TestService server: the reference
// peer benches compare uxds against, and a second real gRPC implementation
// for interop tests. A separate program, never linked with uxds: gRPC C++
// links OpenSSL, uxds links BoringSSL.
//
//   grpc_cpp_test_server [--host 127.0.0.1] [--port N] [--xds]
//
// Plaintext. Prints `PORT <n>` on stdout once serving (--port 0, the
// default, picks a free port). Exits 0 on SIGTERM or SIGINT.
//
// --xds: an xDS-enabled server (A36: XdsServerBuilder, on a fixed --port)
// with XdsServerCredentials over an insecure fallback (A29: a filter chain's
// DownstreamTlsContext makes its connections TLS). Its bootstrap comes from
// $GRPC_XDS_BOOTSTRAP. Prints `SERVING` once xDS says it serves, and
// `NOT_SERVING <message>` for each refusal.
//
// Uses the callback API, gRPC C++'s fastest server path, so benches compare
// against gRPC at its best. Semantics follow the interop server:
//  - EmptyCall answers an Empty.
//  - UnaryCall answers with response_size zero bytes, or ends with
//    response_status when its code is not OK.
//  - FullDuplexCall answers each request as it arrives with one response per
//    response_parameters entry, ends with a request's response_status when
//    its code is not OK, and with OK once the client half-closes.
#include <grpcpp/grpcpp.h>
#include <grpcpp/xds_server_builder.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "grpc/testing/empty.pb.h"
#include "grpc/testing/messages.pb.h"
#include "grpc/testing/test.grpc.pb.h"

namespace {

using grpc::testing::EchoStatus;
using grpc::testing::Empty;
using grpc::testing::SimpleRequest;
using grpc::testing::SimpleResponse;
using grpc::testing::StreamingOutputCallRequest;
using grpc::testing::StreamingOutputCallResponse;

grpc::Status ToStatus(const EchoStatus& echo) {
  return grpc::Status(static_cast<grpc::StatusCode>(echo.code()), echo.message());
}

class FullDuplexReactor
    : public grpc::ServerBidiReactor<StreamingOutputCallRequest, StreamingOutputCallResponse> {
 public:
  FullDuplexReactor() { StartRead(&request_); }

  void OnReadDone(bool ok) override {
    if (!ok) {  // The client half-closed (or the call is gone).
      Finish(grpc::Status::OK);
      return;
    }
    if (request_.has_response_status() && request_.response_status().code() != 0) {
      Finish(ToStatus(request_.response_status()));
      return;
    }
    next_response_ = 0;
    WriteNextOrRead();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "FullDuplexCall: write failed"));
      return;
    }
    WriteNextOrRead();
  }

  void OnDone() override { delete this; }

 private:
  // One write or read in flight at a time: answers follow requests in order.
  void WriteNextOrRead() {
    if (next_response_ < request_.response_parameters_size()) {
      int size = request_.response_parameters(next_response_++).size();
      response_.mutable_payload()->mutable_body()->assign(static_cast<size_t>(size), '\0');
      StartWrite(&response_);
      return;
    }
    StartRead(&request_);
  }

  StreamingOutputCallRequest request_;
  StreamingOutputCallResponse response_;
  int next_response_ = 0;
};

class TestServiceImpl final : public grpc::testing::TestService::CallbackService {
 public:
  grpc::ServerUnaryReactor* EmptyCall(grpc::CallbackServerContext* context, const Empty*,
                                      Empty*) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* UnaryCall(grpc::CallbackServerContext* context,
                                      const SimpleRequest* request,
                                      SimpleResponse* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (request->has_response_status() && request->response_status().code() != 0) {
      reactor->Finish(ToStatus(request->response_status()));
      return reactor;
    }
    if (request->response_size() < 0) {
      reactor->Finish(
          grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "response_size: must be >= 0"));
      return reactor;
    }
    response->mutable_payload()->mutable_body()->assign(
        static_cast<size_t>(request->response_size()), '\0');
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerBidiReactor<StreamingOutputCallRequest, StreamingOutputCallResponse>* FullDuplexCall(
      grpc::CallbackServerContext*) override {
    return new FullDuplexReactor();
  }
};

// Prints each serving-status change of the xDS-enabled server.
class PrintingNotifier : public grpc::XdsServerServingStatusNotifierInterface {
 public:
  void OnServingStatusUpdate(std::string /*uri*/, ServingStatusUpdate update) override {
    if (update.status.ok()) {
      std::printf("SERVING\n");
    } else {
      std::printf("NOT_SERVING %s\n", update.status.error_message().c_str());
    }
    std::fflush(stdout);
  }
};

int Usage(const char* program) {
  std::fprintf(stderr, "usage: %s [--host 127.0.0.1] [--port N] [--xds]\n", program);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 0;
  bool xds = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--xds") == 0) {
      xds = true;
    } else if (std::strcmp(argv[i], "--host") == 0 && i + 1 < argc) {
      host = argv[++i];
    } else if (std::strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
      char* end = nullptr;
      long value = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || value < 0 || value > 65535) return Usage(argv[0]);
      port = static_cast<int>(value);
    } else {
      return Usage(argv[0]);
    }
  }

  // Block the stop signals before gRPC starts its threads (they inherit the
  // mask), so only sigwait below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  TestServiceImpl service;
  std::string address = host.find(':') == std::string::npos
                            ? host + ":" + std::to_string(port)
                            : "[" + host + "]:" + std::to_string(port);
  int selected_port = 0;
  PrintingNotifier notifier;
  std::unique_ptr<grpc::Server> server;
  if (xds) {
    if (port == 0) return Usage(argv[0]);  // A36: no ephemeral ports
    grpc::XdsServerBuilder builder;
    builder.set_status_notifier(&notifier);
    builder.AddListeningPort(address,
                             grpc::XdsServerCredentials(grpc::InsecureServerCredentials()));
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    selected_port = port;
  } else {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &selected_port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
  }
  if (server == nullptr || selected_port == 0) {
    std::fprintf(stderr, "cannot listen on %s\n", address.c_str());
    return 1;
  }
  std::printf("PORT %d\n", selected_port);
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  server->Shutdown();
  return 0;
}
