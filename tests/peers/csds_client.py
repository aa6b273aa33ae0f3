#!/usr/bin/python3
"""A grpcio Client Status Discovery Service client (gRFC A40): the real gRPC
client uxds's CSDS service is tested against.

  /usr/bin/python3 tests/peers/csds_client.py --target 127.0.0.1:PORT
      [--stream N] [--exclude-resource-contents] [--node-matcher]
      [--deadline-ms N]

Calls FetchClientStatus once (or, with --stream N, sends N requests on one
StreamClientStatus call, each after the previous response arrived) and
prints one JSON line per response:

  {"response": {"config": [{"client_scope": "...", "node": {...},
                "generic_xds_configs": [{"type_url": "...", "name": "c1",
                  "client_status": "ACKED", "version_info": "1",
                  "xds_config": {"@type": "...", ...decoded resource...},
                  "error_state": {"details": "...", "version_info": "2", ...}}]}]}}

Field names are the proto names, enums their names (json_format). A
resource whose type this script does not know is shown as
{"@type": URL, "value_size": N}. A call that fails prints
{"error": {"code": "INVALID_ARGUMENT", "details": "..."}}.
--node-matcher adds an (empty) ClientStatusRequest.node_matchers entry,
field 1, which uxds's trimmed csds.proto leaves out, as raw bytes.
Exits 0 when every call succeeded, 1 if one failed, 2 on bad arguments.
Only /usr/bin/python3 has grpcio.
"""

import argparse
import json
import os
import queue
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc  # noqa: E402
from google.protobuf import json_format  # noqa: E402

import protoload  # noqa: E402

PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")
SERVICE = "/envoy.service.status.v3.ClientStatusDiscoveryService/"
CSDS_PROTO = "envoy/service/status/v3/csds.proto"
# Resource types decoded in the output (the rest is shown by type and size).
RESOURCE_PROTOS = [
    "envoy/config/cluster/v3/cluster.proto",
    "envoy/config/endpoint/v3/endpoint.proto",
]
# An empty NodeMatcher as ClientStatusRequest field 1 (tag 0x0a, length 0).
NODE_MATCHER_FIELD = b"\x0a\x00"

modules = protoload.load([CSDS_PROTO] + RESOURCE_PROTOS, proto_paths=[PROTO_DIR], grpc_services=False)
csds_pb2 = modules.messages(CSDS_PROTO)
RESOURCE_MESSAGES = {}
for proto in RESOURCE_PROTOS:
    for message_class in vars(modules.messages(proto)).values():
        descriptor = getattr(message_class, "DESCRIPTOR", None)
        if isinstance(message_class, type) and hasattr(descriptor, "full_name"):
            RESOURCE_MESSAGES["type.googleapis.com/" + descriptor.full_name] = message_class


def emit(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":"), sort_keys=True) + "\n")
    sys.stdout.flush()


def any_to_dict(any_message):
    message_class = RESOURCE_MESSAGES.get(any_message.type_url)
    if message_class is None:
        return {"@type": any_message.type_url, "value_size": len(any_message.value)}
    resource = message_class()
    resource.ParseFromString(any_message.value)
    out = json_format.MessageToDict(resource, preserving_proto_field_name=True)
    out["@type"] = any_message.type_url
    return out


def response_to_dict(serialized):
    response = csds_pb2.ClientStatusResponse()
    response.ParseFromString(serialized)
    configs = []
    for config in response.config:
        generic_configs = []
        for generic in config.generic_xds_configs:
            resource = None
            if generic.HasField("xds_config"):
                resource = any_to_dict(generic.xds_config)
                generic.ClearField("xds_config")
            out = json_format.MessageToDict(
                generic, preserving_proto_field_name=True, including_default_value_fields=True
            )
            if resource is not None:
                out["xds_config"] = resource
            generic_configs.append(out)
        config.ClearField("generic_xds_configs")
        out = json_format.MessageToDict(config, preserving_proto_field_name=True, including_default_value_fields=True)
        out["generic_xds_configs"] = generic_configs
        configs.append(out)
    return {"config": configs}


def request_bytes(args):
    request = csds_pb2.ClientStatusRequest(exclude_resource_contents=args.exclude_resource_contents)
    data = request.SerializeToString()
    if args.node_matcher:
        data = NODE_MATCHER_FIELD + data
    return data


def emit_error(error):
    emit({"error": {"code": error.code().name, "details": error.details() or ""}})


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", required=True)
    parser.add_argument("--stream", type=int, default=0, metavar="N")
    parser.add_argument("--exclude-resource-contents", action="store_true")
    parser.add_argument("--node-matcher", action="store_true")
    parser.add_argument("--deadline-ms", type=int, default=30000)
    args = parser.parse_args()
    if args.stream < 0:
        parser.error("--stream must be >= 0")

    identity = lambda data: data  # noqa: E731  (requests and responses as bytes)
    timeout = args.deadline_ms / 1000.0
    with grpc.insecure_channel(args.target) as channel:
        if args.stream == 0:
            fetch = channel.unary_unary(
                SERVICE + "FetchClientStatus", request_serializer=identity, response_deserializer=identity
            )
            try:
                emit({"response": response_to_dict(fetch(request_bytes(args), timeout=timeout))})
            except grpc.RpcError as error:
                emit_error(error)
                return 1
            return 0

        stream = channel.stream_stream(
            SERVICE + "StreamClientStatus", request_serializer=identity, response_deserializer=identity
        )
        # Ping-pong: the next request goes out once the previous response is in.
        requests = queue.Queue()
        done = object()

        def request_iterator():
            while True:
                item = requests.get()
                if item is done:
                    return
                yield item

        call = stream(request_iterator(), timeout=timeout)
        try:
            for i in range(args.stream):
                requests.put(request_bytes(args))
                try:
                    emit({"response": response_to_dict(next(call))})
                except StopIteration:
                    emit({"error": {"code": "OK", "details": f"stream ended after {i} responses"}})
                    return 1
            requests.put(done)
            for extra in call:
                emit({"unexpected_response": response_to_dict(extra)})
                return 1
        except grpc.RpcError as error:
            requests.put(done)
            emit_error(error)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
