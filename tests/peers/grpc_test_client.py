#!/usr/bin/python3
"""A grpcio grpc.testing.TestService client: the real gRPC client uxds's
server-side code is tested against.

  /usr/bin/python3 tests/peers/grpc_test_client.py --target 127.0.0.1:PORT
      [--tls-ca ca.pem [--server-name-override NAME] [--tls-cert c.pem --tls-key c.key]]
      --call EmptyCall|UnaryCall|StreamingOutputCall|FullDuplexCall
      [--count N] [--messages M] [--request-size N] [--response-size N]
      [--echo-status CODE:MESSAGE] [--fill-server-id]
      [--metadata key=value ...] [--deadline-ms N] [--wait-for-ready]
      [--max-receive-bytes N]
      [--expect-code CODE]

Prints one JSON line per call:
  {"call": "UnaryCall", "code": "OK", "message": "", "response_size": 10,
   "responses": 1, "initial_metadata": {...}, "trailing_metadata": {...}}
 - response_size: payload bytes received (summed over a stream's responses);
   responses: how many response messages arrived.
 - metadata maps a key to its value; repeated keys are joined with ","
   (as HTTP/2 does); values of `-bin` keys are base64 (no padding).
 - message is the status message after grpcio's percent-decoding (UTF-8).
 - server_id / hostname appear with --fill-server-id.
Exits 0 when every call ended OK (with --expect-code: with that code), 1 if
not, 2 on bad arguments.

Streaming calls (StreamingOutputCall, FullDuplexCall) ask for --messages
responses of --response-size bytes; FullDuplexCall sends them ping-pong: one
request, wait for its response, next request, then half-closes.
"""

import argparse
import base64
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc  # noqa: E402

import protoload  # noqa: E402

messages_pb2, empty_pb2, test_pb2_grpc = protoload.load_grpc_testing()


def status_code(text):
    text = text.strip()
    if text.isdigit():
        for code in grpc.StatusCode:
            if code.value[0] == int(text):
                return code
    else:
        try:
            return grpc.StatusCode[text.upper()]
        except KeyError:
            pass
    raise argparse.ArgumentTypeError(f"unknown status code {text!r}")


def metadata_pair(text):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"metadata {text!r}: expected key=value")
    key = key.lower()
    return (key, value.encode() if key.endswith("-bin") else value)


def metadata_to_json(metadata):
    result = {}
    for key, value in metadata or ():
        if isinstance(value, bytes):
            value = base64.b64encode(value).decode().rstrip("=")
        result[key] = f"{result[key]},{value}" if key in result else value
    return result


def echo_status(text):
    code, sep, message = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"--echo-status {text!r}: expected CODE:MESSAGE")
    return messages_pb2.EchoStatus(code=status_code(code).value[0], message=message)


def channel_options(args):
    if args.max_receive_bytes is None:
        return []
    return [("grpc.max_receive_message_length", args.max_receive_bytes)]


def make_channel(args):
    if not args.tls_ca:
        return grpc.insecure_channel(args.target, options=channel_options(args))
    with open(args.tls_ca, "rb") as f:
        root = f.read()
    key = cert = None
    if args.tls_cert:
        with open(args.tls_key, "rb") as f:
            key = f.read()
        with open(args.tls_cert, "rb") as f:
            cert = f.read()
    credentials = grpc.ssl_channel_credentials(root_certificates=root, private_key=key, certificate_chain=cert)
    options = channel_options(args)
    if args.server_name_override:
        options.append(("grpc.ssl_target_name_override", args.server_name_override))
    return grpc.secure_channel(args.target, credentials, options=options)


def call_once(stub, args):
    """One call; returns its result as a dict for the JSON line."""
    result = {
        "call": args.call,
        "code": "",
        "message": "",
        "response_size": 0,
        "responses": 0,
        "initial_metadata": {},
        "trailing_metadata": {},
    }
    kwargs = {"metadata": args.metadata or None, "wait_for_ready": args.wait_for_ready or None}
    if args.deadline_ms is not None:
        kwargs["timeout"] = args.deadline_ms / 1000.0

    def count(response):
        result["responses"] += 1
        result["response_size"] += len(response.payload.body)

    if args.call == "EmptyCall":
        call = stub.EmptyCall.future(empty_pb2.Empty(), **kwargs)
        wait_unary(call, result, count_payload=False)
    elif args.call == "UnaryCall":
        request = messages_pb2.SimpleRequest(
            response_size=args.response_size,
            payload=messages_pb2.Payload(body=bytes(args.request_size)),
            fill_server_id=args.fill_server_id,
        )
        if args.echo_status is not None:
            request.response_status.CopyFrom(args.echo_status)
        call = stub.UnaryCall.future(request, **kwargs)
        response = wait_unary(call, result, count_payload=True)
        if response is not None and args.fill_server_id:
            result["server_id"] = response.server_id
            result["hostname"] = response.hostname
    elif args.call == "StreamingOutputCall":
        request = streaming_request(args, args.messages)
        call = stub.StreamingOutputCall(request, **kwargs)
        drain_stream(call, iter(call), count, result)
    else:
        ping_pong = PingPong(args)

        def count_and_continue(response):
            count(response)
            ping_pong.on_response()

        call = stub.FullDuplexCall(ping_pong.requests(), **kwargs)
        try:
            drain_stream(call, iter(call), count_and_continue, result)
        finally:
            ping_pong.on_done()
    return result


def wait_unary(call, result, count_payload):
    try:
        response = call.result()
        result["responses"] = 1
        if count_payload:
            result["response_size"] = len(response.payload.body)
    except grpc.RpcError:
        response = None
    finish(call, result)
    return response


def drain_stream(call, responses, count, result):
    try:
        for response in responses:
            count(response)
    except grpc.RpcError:
        pass
    finish(call, result)


def finish(call, result):
    result["code"] = call.code().name
    result["message"] = call.details() or ""
    result["initial_metadata"] = metadata_to_json(call.initial_metadata())
    result["trailing_metadata"] = metadata_to_json(call.trailing_metadata())


def streaming_request(args, responses):
    request = messages_pb2.StreamingOutputCallRequest(payload=messages_pb2.Payload(body=bytes(args.request_size)))
    for _ in range(responses):
        request.response_parameters.add(size=args.response_size)
    if args.echo_status is not None:
        request.response_status.CopyFrom(args.echo_status)
    return request


class PingPong:
    """FullDuplexCall requests, each sent only after the previous response.

    grpcio pulls requests from its own thread; the condition keeps the
    stream strictly ping-pong so the server answers each message as it
    arrives rather than a batch.
    """

    def __init__(self, args):
        self._args = args
        self._condition = threading.Condition()
        self._received = 0
        self._done = False

    def requests(self):
        args = self._args
        for i in range(args.messages):
            request = messages_pb2.StreamingOutputCallRequest(
                payload=messages_pb2.Payload(body=bytes(args.request_size))
            )
            request.response_parameters.add(size=args.response_size)
            if args.echo_status is not None and i == args.messages - 1:
                request.response_status.CopyFrom(args.echo_status)
            yield request
            with self._condition:
                self._condition.wait_for(lambda: self._received > i or self._done)
                if self._done:
                    return

    def on_response(self):
        with self._condition:
            self._received += 1
            self._condition.notify_all()

    def on_done(self):
        with self._condition:
            self._done = True
            self._condition.notify_all()


def main():
    parser = argparse.ArgumentParser(description="grpc.testing.TestService client (grpcio)")
    parser.add_argument("--target", required=True, help="host:port")
    parser.add_argument("--tls-ca", help="CA (PEM) to verify the server; enables TLS")
    parser.add_argument("--server-name-override", help="name to verify the server certificate against")
    parser.add_argument("--tls-cert", help="client certificate (PEM) for mutual TLS")
    parser.add_argument("--tls-key", help="client private key (PEM)")
    parser.add_argument(
        "--call", required=True, choices=["EmptyCall", "UnaryCall", "StreamingOutputCall", "FullDuplexCall"]
    )
    parser.add_argument("--count", type=int, default=1, help="calls to make, one after another")
    parser.add_argument("--messages", type=int, default=3, help="responses per streaming call")
    parser.add_argument("--request-size", type=int, default=0, help="request payload bytes")
    parser.add_argument("--response-size", type=int, default=0, help="response payload bytes asked for")
    parser.add_argument("--echo-status", type=echo_status, help="CODE:MESSAGE the server should end with")
    parser.add_argument("--fill-server-id", action="store_true", help="UnaryCall: ask for server_id/hostname")
    parser.add_argument("--metadata", type=metadata_pair, nargs="+", action="extend", default=[], metavar="K=V")
    parser.add_argument("--deadline-ms", type=int)
    parser.add_argument("--max-receive-bytes", type=int, help="largest response message accepted (default 4 MiB)")
    parser.add_argument("--wait-for-ready", action="store_true")
    parser.add_argument("--expect-code", type=status_code, default=grpc.StatusCode.OK)
    args = parser.parse_args()
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    if (args.tls_cert or args.server_name_override) and not args.tls_ca:
        parser.error("--tls-cert / --server-name-override need --tls-ca")
    sys.stdout.reconfigure(encoding="utf-8")

    all_expected = True
    with make_channel(args) as channel:
        stub = test_pb2_grpc.TestServiceStub(channel)
        for _ in range(args.count):
            result = call_once(stub, args)
            print(json.dumps(result, ensure_ascii=False), flush=True)
            all_expected = all_expected and result["code"] == args.expect_code.name
    return 0 if all_expected else 1


if __name__ == "__main__":
    sys.exit(main())
