#!/usr/bin/python3
"""A grpcio ADS client, driven by JSON commands: an xDS client that is not
ours, used to check the fake control plane (fake_control_plane_selftest).

  /usr/bin/python3 tests/peers/ads_client.py --target 127.0.0.1:PORT
      [--ca ca.pem [--client-cert c.pem --client-key c.key]] [--command-fd N]
      [--check-sotw-responses]

Prints `READY` once the channel exists, then reads commands (one JSON
object per line, from stdin or file descriptor N), answers each with one
line ({"ok":true} or {"ok":false,"error":..}), and exits when its command
input closes. Commands act on the most recently opened call:
  {"cmd":"open","wait_for_ready":false}  start a StreamAggregatedResources call
                                       (wait_for_ready: queue it while the
                                       server cannot be reached, instead of
                                       failing it)
  {"cmd":"request","type_url":..,"version_info":..,"resource_names":[..],
   "response_nonce":..,"node":{"id":..,"cluster":..,"user_agent_name":..,
   "client_features":[..]},"error_detail":{"code":N,"message":..}}
  {"cmd":"half_close"}                 no more requests on this call
  {"cmd":"cancel"}                     cancel the call
Event lines:
  {"event":"response","call":C,"type_url":..,"version_info":..,"nonce":..,
   "control_plane":..,"resources":[{"type_url":..,"value_b64":..,
   "wrapper":{"name":..,"version":..,"type_url":..,"value_b64":..}}],
   "resource_errors":[{"name":..,"code":N,"message":..}]}
  {"event":"response","call":C,"undecodable_b64":..}   not a DiscoveryResponse
  {"event":"call_ended","call":C,"code":N,"details":..}
  {"event":"violation","call":C,"message":..}   with --check-sotw-responses:
                                       a response broke a rule of
                                       sotw_response_checker.py
"""

import argparse
import base64
import json
import os
import queue
import sys
import threading
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc  # noqa: E402
from google.protobuf import message as protobuf_message  # noqa: E402

import protoload  # noqa: E402
from sotw_response_checker import SotwResponseChecker  # noqa: E402

PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")
ADS_METHOD = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
RESOURCE_WRAPPER_TYPE_URL = "type.googleapis.com/envoy.service.discovery.v3.Resource"

discovery_pb2 = protoload.load(
    ["envoy/service/discovery/v3/discovery.proto"], proto_paths=[PROTO_DIR], grpc_services=False
).messages("envoy/service/discovery/v3/discovery.proto")

_print_lock = threading.Lock()


def emit(obj):
    with _print_lock:
        sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
        sys.stdout.flush()


def b64(data):
    return base64.b64encode(data).decode()


def response_event(call_id, data):
    response = discovery_pb2.DiscoveryResponse()
    try:
        response.ParseFromString(data)
    except protobuf_message.DecodeError:
        return {"event": "response", "call": call_id, "undecodable_b64": b64(data)}
    resources = []
    for any_message in response.resources:
        entry = {"type_url": any_message.type_url, "value_b64": b64(any_message.value)}
        if any_message.type_url == RESOURCE_WRAPPER_TYPE_URL:
            wrapper = discovery_pb2.Resource()
            wrapper.ParseFromString(any_message.value)
            entry["wrapper"] = {
                "name": wrapper.name,
                "version": wrapper.version,
                "type_url": wrapper.resource.type_url,
                "value_b64": b64(wrapper.resource.value),
            }
        resources.append(entry)
    return {
        "event": "response",
        "call": call_id,
        "type_url": response.type_url,
        "version_info": response.version_info,
        "nonce": response.nonce,
        "control_plane": response.control_plane.identifier,
        "resources": resources,
        "resource_errors": [
            {"name": e.resource_name.name, "code": e.error_detail.code, "message": e.error_detail.message}
            for e in response.resource_errors
        ],
    }


class Call:
    def __init__(self, call_id, method, wait_for_ready, check_sotw):
        self.id = call_id
        self.checker = SotwResponseChecker() if check_sotw else None
        self.requests = queue.SimpleQueue()
        self.call = method(iter(self.requests.get, None), wait_for_ready=wait_for_ready)
        threading.Thread(target=self._read, name=f"call-{call_id}", daemon=True).start()

    def _read(self):
        try:
            for data in self.call:
                emit(response_event(self.id, data))
                if self.checker is not None:
                    self._check(data)
            code, details = self.call.code(), self.call.details()
        except grpc.RpcError as e:
            code, details = e.code(), e.details()
        emit({"event": "call_ended", "call": self.id, "code": code.value[0], "details": details or ""})

    def _check(self, data):
        response = discovery_pb2.DiscoveryResponse()
        try:
            response.ParseFromString(data)
        except protobuf_message.DecodeError:
            emit({"event": "violation", "call": self.id, "message": "undecodable response"})
            return
        for message in self.checker.on_response(response):
            emit({"event": "violation", "call": self.id, "message": message})

    def send(self, request):
        if self.checker is not None:
            self.checker.on_request(request)
        self.requests.put(request)


def build_request(command):
    request = discovery_pb2.DiscoveryRequest(
        type_url=command.get("type_url", ""),
        version_info=command.get("version_info", ""),
        resource_names=command.get("resource_names", []),
        response_nonce=command.get("response_nonce", ""),
    )
    node = command.get("node")
    if node is not None:
        request.node.id = node.get("id", "")
        request.node.cluster = node.get("cluster", "")
        request.node.user_agent_name = node.get("user_agent_name", "")
        request.node.client_features.extend(node.get("client_features", []))
    error = command.get("error_detail")
    if error is not None:
        request.error_detail.code = int(error.get("code", 0))
        request.error_detail.message = error.get("message", "")
    return request


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", required=True)
    parser.add_argument("--ca")
    parser.add_argument("--client-cert")
    parser.add_argument("--client-key")
    parser.add_argument("--command-fd", type=int, default=0)
    parser.add_argument("--check-sotw-responses", action="store_true")
    args = parser.parse_args()

    if args.ca:
        def read(path):
            with open(path, "rb") as f:
                return f.read()

        credentials = grpc.ssl_channel_credentials(
            root_certificates=read(args.ca),
            private_key=read(args.client_key) if args.client_key else None,
            certificate_chain=read(args.client_cert) if args.client_cert else None,
        )
        channel = grpc.secure_channel(args.target, credentials)
    else:
        channel = grpc.insecure_channel(args.target)
    method = channel.stream_stream(
        ADS_METHOD,
        request_serializer=discovery_pb2.DiscoveryRequest.SerializeToString,
        response_deserializer=lambda data: data,  # parsed in response_event()
    )
    calls = []
    with _print_lock:
        sys.stdout.write("READY\n")
        sys.stdout.flush()

    for raw in os.fdopen(args.command_fd, "rb"):
        if not raw.strip():
            continue
        reply = {"ok": True}
        try:
            command = json.loads(raw)
            name = command.get("cmd")
            if name == "open":
                calls.append(Call(len(calls) + 1, method, bool(command.get("wait_for_ready", False)),
                                  args.check_sotw_responses))
                reply["call"] = len(calls)
            elif not calls:
                raise ValueError("no call open")
            elif name == "request":
                calls[-1].send(build_request(command))
            elif name == "half_close":
                calls[-1].requests.put(None)
            elif name == "cancel":
                calls[-1].call.cancel()
            else:
                raise ValueError(f"unknown command {name!r}")
        except Exception as e:
            traceback.print_exc()
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        emit(reply)
    os._exit(0)


if __name__ == "__main__":
    main()
