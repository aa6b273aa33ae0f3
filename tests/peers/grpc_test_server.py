#!/usr/bin/python3
"""A grpcio grpc.testing.TestService server: the real gRPC server uxds's
client-side code is tested and benchmarked against.

  /usr/bin/python3 tests/peers/grpc_test_server.py [--host 127.0.0.1] [--port 0]
      [--tls-cert server.pem --tls-key server.key [--client-ca ca.pem]]
      [--server-id NAME]

Prints `PORT <n>` on stdout once serving. Exits 0 on SIGTERM / SIGINT, or
after a `goaway` behavior has shut the server down (then it prints
`GOAWAY` when the shutdown starts and `STOPPED` when it is done).

Services: EmptyCall, UnaryCall, StreamingOutputCall, FullDuplexCall.
 - UnaryCall answers with `response_size` zero bytes and, if
   `response_status` is set, ends with that status (interop semantics).
   With `fill_server_id` it fills server_id and hostname (--server-id).
 - StreamingOutputCall sends one response per response_parameters entry
   (size zero bytes, after interval_us).
 - FullDuplexCall answers each request as it arrives, one response per
   response_parameters entry, then ends with the request's response_status.

Behaviors a call asks for through request metadata: one or more
`x-uxds-behavior` headers, each holding one of
  delay-ms=<n>          sleep n ms before answering (deadline tests)
  echo-metadata         send the request's headers back as initial metadata
                        and as trailers (reserved gRPC/HTTP headers excluded)
  status=<CODE>:<msg>   end the call with that status; CODE is a name
                        (INVALID_ARGUMENT) or a number; <msg> is
                        percent-decoded first, so a header (ASCII only) can
                        carry any UTF-8 message, e.g. `status=INTERNAL:caf%C3%A9%0A`
  large-response=<n>    UnaryCall answers with an n-byte payload
  goaway[=<grace_ms>]   shut the server down while this call is in flight:
                        grpcio sends GOAWAY at once, lets in-flight calls
                        finish for grace_ms (default 5000), then exits
  die                   os._exit(3): unary calls die before answering,
                        streaming calls after their first response (the
                        peer sees the TCP connection close mid-stream)
The interop headers `x-grpc-test-echo-initial` (echoed as initial metadata)
and `x-grpc-test-echo-trailing-bin` (echoed as trailer) work too.
"""

import argparse
import os
import signal
import socket
import sys
import threading
import time
import urllib.parse
from concurrent import futures

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc  # noqa: E402

import protoload  # noqa: E402
from peer_util import server_credentials  # noqa: E402

messages_pb2, empty_pb2, test_pb2_grpc = protoload.load_grpc_testing()

BEHAVIOR_HEADER = "x-uxds-behavior"
DEFAULT_GOAWAY_GRACE_MS = 5000
DIE_EXIT_CODE = 3
# Headers that belong to HTTP/2 or gRPC itself and must not be echoed.
RESERVED_HEADERS = {"user-agent", "te", "content-type", "host", "accept-encoding"}


def parse_status_code(text):
    text = text.strip()
    if text.isdigit():
        number = int(text)
        for code in grpc.StatusCode:
            if code.value[0] == number:
                return code
        raise ValueError(f"unknown status code number {number}")
    try:
        return grpc.StatusCode[text.upper()]
    except KeyError:
        raise ValueError(f"unknown status code {text!r}") from None


class Behavior:
    """What the request metadata asked this call to do."""

    def __init__(self, metadata):
        self.delay_ms = 0
        self.echo_metadata = False
        self.status = None  # (grpc.StatusCode, str)
        self.large_response = None
        self.goaway_grace_ms = None
        self.die = False
        self.echo_initial = []
        self.echo_trailing = []
        self.request_headers = []
        for key, value in metadata:
            if key.startswith(":") or key.startswith("grpc-") or key in RESERVED_HEADERS:
                continue
            self.request_headers.append((key, value))
            if key == "x-grpc-test-echo-initial":
                self.echo_initial.append((key, value))
            elif key == "x-grpc-test-echo-trailing-bin":
                self.echo_trailing.append((key, value))
            elif key == BEHAVIOR_HEADER:
                self._parse(value)

    def _parse(self, text):
        name, _, arg = text.strip().partition("=")
        if name == "delay-ms":
            self.delay_ms = int(arg)
        elif name == "echo-metadata":
            self.echo_metadata = True
        elif name == "status":
            code, _, message = arg.partition(":")
            self.status = (parse_status_code(code), urllib.parse.unquote(message, errors="strict"))
        elif name == "large-response":
            self.large_response = int(arg)
        elif name == "goaway":
            self.goaway_grace_ms = int(arg) if arg else DEFAULT_GOAWAY_GRACE_MS
        elif name == "die":
            self.die = True
        else:
            raise ValueError(f"{BEHAVIOR_HEADER}: unknown behavior {text!r}")


def sleep_while_active(context, seconds):
    """Sleeps, but stops early once the call is gone (deadline, cancel)."""
    end = time.monotonic() + seconds
    while context.is_active():
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.01))


def payload(size):
    return messages_pb2.Payload(body=bytes(size))


class TestService(test_pb2_grpc.TestServiceServicer):
    def __init__(self, server_id, shutdown):
        self.server_id = server_id
        self.shutdown = shutdown  # shutdown(grace_seconds): GOAWAY and exit

    def _begin(self, context):
        """Applies the behaviors due before the first response.

        Returns the Behavior, or None when the call already failed (a bad
        behavior header ends the call with INVALID_ARGUMENT).
        """
        try:
            behavior = Behavior(context.invocation_metadata())
        except ValueError as e:
            context.set_code(grpc.StatusCode.INVALID_ARGUMENT)
            context.set_details(str(e))
            return None
        initial = list(behavior.echo_initial)
        if behavior.echo_metadata:
            initial += behavior.request_headers
        if initial:
            context.send_initial_metadata(initial)
        trailing = list(behavior.echo_trailing)
        if behavior.echo_metadata:
            trailing += behavior.request_headers
        if trailing:
            context.set_trailing_metadata(trailing)
        if behavior.goaway_grace_ms is not None:
            self.shutdown(behavior.goaway_grace_ms / 1000.0)
        if behavior.delay_ms:
            sleep_while_active(context, behavior.delay_ms / 1000.0)
        return behavior

    @staticmethod
    def _end(behavior, context, echo_status=None):
        """Sets the final status: an explicit behavior wins over the request's."""
        if behavior.status is not None:
            context.set_code(behavior.status[0])
            context.set_details(behavior.status[1])
            return True
        if echo_status is not None and echo_status.code != 0:
            context.set_code(parse_status_code(str(echo_status.code)))
            context.set_details(echo_status.message)
            return True
        return False

    def EmptyCall(self, request, context):
        behavior = self._begin(context)
        if behavior is None:
            return empty_pb2.Empty()
        if behavior.die:
            os._exit(DIE_EXIT_CODE)
        self._end(behavior, context)
        return empty_pb2.Empty()

    def UnaryCall(self, request, context):
        behavior = self._begin(context)
        if behavior is None:
            return messages_pb2.SimpleResponse()
        if behavior.die:
            os._exit(DIE_EXIT_CODE)
        if self._end(behavior, context, request.response_status if request.HasField("response_status") else None):
            return messages_pb2.SimpleResponse()
        size = behavior.large_response if behavior.large_response is not None else request.response_size
        response = messages_pb2.SimpleResponse(payload=payload(size))
        if request.fill_server_id:
            response.server_id = self.server_id
            response.hostname = socket.gethostname()
        return response

    def StreamingOutputCall(self, request, context):
        behavior = self._begin(context)
        if behavior is None:
            return
        for parameters in request.response_parameters:
            if parameters.interval_us:
                sleep_while_active(context, parameters.interval_us / 1e6)
            yield messages_pb2.StreamingOutputCallResponse(payload=payload(parameters.size))
            # Resumed once grpcio handed the response to the transport.
            if behavior.die:
                os._exit(DIE_EXIT_CODE)
        if behavior.die:
            os._exit(DIE_EXIT_CODE)
        self._end(behavior, context, request.response_status if request.HasField("response_status") else None)

    def FullDuplexCall(self, request_iterator, context):
        behavior = self._begin(context)
        if behavior is None:
            return
        sent = 0
        for request in request_iterator:
            if sent and behavior.die:
                os._exit(DIE_EXIT_CODE)
            if request.HasField("response_status") and request.response_status.code != 0:
                self._end(behavior, context, request.response_status)
                return
            for parameters in request.response_parameters:
                if parameters.interval_us:
                    sleep_while_active(context, parameters.interval_us / 1e6)
                yield messages_pb2.StreamingOutputCallResponse(payload=payload(parameters.size))
                sent += 1
        if behavior.die:
            os._exit(DIE_EXIT_CODE)
        self._end(behavior, context)


def main():
    parser = argparse.ArgumentParser(description="grpc.testing.TestService server (grpcio)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--tls-cert", help="server certificate chain (PEM); enables TLS")
    parser.add_argument("--tls-key", help="server private key (PEM)")
    parser.add_argument("--client-ca", help="CA (PEM) that client certificates must chain to: mutual TLS")
    parser.add_argument("--server-id", default=None, help="SimpleResponse.server_id (default grpcio-<port>)")
    parser.add_argument("--max-workers", type=int, default=32)
    args = parser.parse_args()
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    if args.client_ca and not args.tls_cert:
        parser.error("--client-ca needs --tls-cert and --tls-key")

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=args.max_workers))
    stop_once = threading.Lock()

    def shutdown(grace_seconds):
        if not stop_once.acquire(blocking=False):
            return
        print("GOAWAY", flush=True)
        # stop() returns at once; the event is set when every call is done or
        # the grace period cancelled the rest. Then wait_for_termination returns.
        server.stop(grace=grace_seconds)

    service = TestService(args.server_id, shutdown)
    test_pb2_grpc.add_TestServiceServicer_to_server(service, server)
    address = f"{args.host}:{args.port}" if ":" not in args.host else f"[{args.host}]:{args.port}"
    if args.tls_cert:
        credentials = server_credentials(args.tls_cert, args.tls_key, args.client_ca)
        port = server.add_secure_port(address, credentials)
    else:
        port = server.add_insecure_port(address)
    if port == 0:
        print(f"cannot listen on {address}", file=sys.stderr)
        return 1
    if service.server_id is None:
        service.server_id = f"grpcio-{port}"

    def on_signal(signum, frame):
        server.stop(grace=0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    print(f"PORT {port}", flush=True)
    server.wait_for_termination()
    print("STOPPED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
