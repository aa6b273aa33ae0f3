#!/usr/bin/python3
"""A scripted xDS control plane: a grpcio ADS server for XdsClient tests.

  /usr/bin/python3 tests/peers/fake_control_plane.py [--host 127.0.0.1] [--port 0]
      [--tls-cert server.pem --tls-key server.key [--client-ca ca.pem]]
      [--command-fd N]

Serves envoy.service.discovery.v3.AggregatedDiscoveryService/
StreamAggregatedResources (state of the world) and prints `PORT <n>` once
clients can connect. It is driven by JSON commands, one object per line, read
from stdin (or from file descriptor N); it answers each with one JSON line on
stdout and exits as soon as its command input closes, so it never outlives
the test that started it. tests/support/fake_control_plane.h is the C++ side.

Clients connect to a small TCP forwarder in front of the grpcio server. It
lets a test refuse new connections while established ones carry on
(stop_listening), and cut every connection without an HTTP/2 goodbye
(drop_connections: what a client sees when a control plane crashes).

Command lines (`id` is optional and echoed in the reply; `stream` is a
stream id, or absent for the most recently opened stream still open):
  {"cmd":"send","stream":S,"type_url":T,"version_info":V,"nonce":N,
   "resources":[R...],"wrap_in_resource":false,
   "resource_errors":[{"name":..,"code":5,"message":".."}],
   "control_plane":"identifier"}
      -> {"ok":true,"stream":S,"nonce":N}  (nonce made up when absent)
      R is {"any_b64":B} (serialized Any bytes, put in verbatim: may be
      garbage) or {"type_url":T,"value_b64":B} (an Any built here); either
      may add "wrapper_name" / "wrapper_version" for wrap_in_resource.
  {"cmd":"send_raw","stream":S,"data_b64":B}   one message of any bytes
  {"cmd":"close_stream","stream":S,"code":14,"message":".."}
  {"cmd":"close_all_streams","code":14,"message":".."}
  {"cmd":"stop_listening"}  {"cmd":"start_listening"}  {"cmd":"drop_connections"}
  {"cmd":"freeze_connections"}  established connections stay open but relay
      nothing more, either way (a hung peer); new ones are not affected
  {"cmd":"set_resources","type_url":T,"version_info":V,
   "resources":{"name":R,...},"resource_errors":[...],"wrap_in_resource":false}
      Answer requests of type T from this store from now on: every request
      gets every requested name the store has (and its resource_errors
      entries), which is the whole subscribed set LDS/CDS need. Changes are
      pushed to every stream subscribed to T. A request that only ACKs or
      NACKs what was sent (same store generation, same names) gets no answer,
      except with "answer_nacks":true: then every NACK gets the same answer
      again at once (go-control-plane's SotW server does that).
  {"cmd":"clear_resources","type_url":T}
  {"cmd":"ignore_requests","ignore":true,"type_url":T}   T absent: all types
  {"cmd":"delay_responses","delay_ms":N}                 automatic answers only
  {"cmd":"streams"} -> {"ok":true,"streams":[open stream ids]}
  {"cmd":"lrs_send","stream":S,"data_b64":B}   one LoadStatsResponse (any bytes)
      on an LRS stream (S absent: the most recently opened one still open)
  {"cmd":"lrs_close_stream","stream":S,"code":14,"message":".."}
  {"cmd":"ping"}
Errors: {"ok":false,"error":"..."}.

Event lines, written whenever something happens:
  {"event":"stream_opened","stream":S,"metadata":{...}}
  {"event":"request","stream":S,"type_url":..,"version_info":..,
   "resource_names":[..],"response_nonce":..,
   "error_detail":{"code":N,"message":..} or null,
   "node":{...}}                      (node only if the request carried one)
  {"event":"response_sent","stream":S,"type_url":..,"version_info":..,
   "nonce":..,"auto":bool}
  {"event":"stream_closed","stream":S,"closed_by":"server"|"peer"}
  {"event":"violation","stream":S,"message":..}
      a request broke a rule of the protocol (tests/peers/ads_request_checker.py);
      written right after that request's event.
  {"event":"lrs_stream_opened","stream":S}
  {"event":"lrs_request","stream":S,"data_b64":B}   one LoadStatsRequest, as sent
  {"event":"lrs_stream_closed","stream":S,"closed_by":"server"|"peer"}

It also serves envoy.service.load_stats.v3.LoadReportingService/
StreamLoadStats (LRS) as a fake load reporting server: requests are passed
to the test as bytes, responses are the test's bytes (lrs_send). LRS
streams have ids of their own kind and are not ADS streams to any command
above.
"""

import argparse
import base64
import itertools
import json
import os
import queue
import sys
import threading
import traceback
from concurrent import futures

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grpc  # noqa: E402
from google.protobuf import json_format  # noqa: E402

import protoload  # noqa: E402
from peer_util import length_delimited, server_credentials  # noqa: E402
from fake_cp_forwarder import TcpForwarder  # noqa: E402
from ads_request_checker import RequestChecker  # noqa: E402

PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")
ADS_METHOD = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
LRS_METHOD = "/envoy.service.load_stats.v3.LoadReportingService/StreamLoadStats"
RESOURCE_WRAPPER_TYPE_URL = "type.googleapis.com/envoy.service.discovery.v3.Resource"
# One pool thread per open stream plus the ones answering new calls.
MAX_STREAMS = 64

discovery_pb2 = protoload.load(
    ["envoy/service/discovery/v3/discovery.proto"], proto_paths=[PROTO_DIR], grpc_services=False
).messages("envoy/service/discovery/v3/discovery.proto")


class CommandError(Exception):
    pass


class Output:
    """Writes JSON lines to stdout from one thread, so that grpcio threads
    never block on a full pipe while the test is busy elsewhere."""

    def __init__(self):
        self._lines = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="output", daemon=True)
        self._thread.start()

    def emit(self, obj):
        self._lines.put(json.dumps(obj, separators=(",", ":")))

    def emit_line(self, text):
        self._lines.put(text)

    def drain(self, timeout_s):
        """Writes out what is queued (up to timeout_s) and stops."""
        self._lines.put(None)
        self._thread.join(timeout_s)

    def _run(self):
        while True:
            line = self._lines.get()
            if line is None:
                return
            try:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
            except OSError:
                os._exit(0)  # whoever read us is gone


# --- protobuf wire encoding, for bytes the message API would not accept ---



def _any(type_url, value):
    return length_delimited(1, type_url.encode()) + length_delimited(2, value)


def _b64(obj, key):
    try:
        return base64.b64decode(obj.get(key, ""), validate=True)
    except ValueError as e:
        raise CommandError(f"{key}: not base64: {e}") from None


def encode_resource(spec, wrap):
    """One DiscoveryResponse.resources entry (serialized Any) from a command's R."""
    if not isinstance(spec, dict):
        raise CommandError(f"resource: expected an object, got {spec!r}")
    if "any_b64" in spec:
        any_bytes = _b64(spec, "any_b64")
    elif "type_url" in spec:
        any_bytes = _any(spec["type_url"], _b64(spec, "value_b64"))
    else:
        raise CommandError(f"resource: needs any_b64 or type_url + value_b64: {spec!r}")
    if not wrap:
        return any_bytes
    # envoy.service.discovery.v3.Resource: version = 1, resource = 2, name = 3.
    wrapper = b""
    if spec.get("wrapper_version"):
        wrapper += length_delimited(1, spec["wrapper_version"].encode())
    wrapper += length_delimited(2, any_bytes)
    if spec.get("wrapper_name"):
        wrapper += length_delimited(3, spec["wrapper_name"].encode())
    return _any(RESOURCE_WRAPPER_TYPE_URL, wrapper)


def encode_response(type_url, version_info, nonce, resources, resource_errors, control_plane):
    """A serialized DiscoveryResponse; `resources` are serialized Any entries."""
    response = discovery_pb2.DiscoveryResponse(type_url=type_url, version_info=version_info, nonce=nonce)
    if control_plane:
        response.control_plane.identifier = control_plane
    for error in resource_errors:
        entry = response.resource_errors.add()
        entry.resource_name.name = error.get("name", "")
        entry.error_detail.code = int(error.get("code", 0))
        entry.error_detail.message = error.get("message", "")
    # Field 2 entries appended after the others: field order does not matter
    # on the wire, and this keeps garbage bytes intact.
    return response.SerializeToString() + b"".join(length_delimited(2, r) for r in resources)


def node_to_json(node):
    out = {
        "id": node.id,
        "cluster": node.cluster,
        "user_agent_name": node.user_agent_name,
        "user_agent_version": node.user_agent_version,
        "client_features": list(node.client_features),
    }
    if node.HasField("locality"):
        out["locality"] = {
            "region": node.locality.region,
            "zone": node.locality.zone,
            "sub_zone": node.locality.sub_zone,
        }
    if node.HasField("metadata"):
        out["metadata"] = json_format.MessageToDict(node.metadata)
    return out


def request_event(stream_id, request):
    event = {
        "event": "request",
        "stream": stream_id,
        "type_url": request.type_url,
        "version_info": request.version_info,
        "resource_names": list(request.resource_names),
        "response_nonce": request.response_nonce,
        "error_detail": None,
    }
    if request.HasField("error_detail"):
        event["error_detail"] = {"code": request.error_detail.code, "message": request.error_detail.message}
    if request.HasField("node"):
        event["node"] = node_to_json(request.node)
    return event


_CLOSE = object()  # outbox marker: end the call with stream.close_status


class Stream:
    def __init__(self, stream_id):
        self.id = stream_id
        self.open = True  # False once closing or closed: nothing more may be sent
        self.close_status = None  # (grpc.StatusCode, message) when the server closes it
        self.outbox = queue.SimpleQueue()  # serialized responses, _CLOSE, or None (call over)
        self.subscriptions = {}  # type_url -> names of the latest request
        self.auto_sent = {}  # type_url -> (store generation, names) last answered


def _responses(stream, context):
    """A call's responses: the stream's outbox until the call is over or closed."""
    while True:
        item = stream.outbox.get()
        if item is None:
            return
        if item is _CLOSE:
            code, message = stream.close_status
            context.set_code(code)
            context.set_details(message)
            return
        yield item


class ResourceStore:
    def __init__(self, generation, version, resources, resource_errors):
        self.generation = generation
        self.version = version
        self.resources = resources  # name -> serialized Any entry (wrapped if asked for)
        self.resource_errors = resource_errors  # name -> error dict
        self.answer_nacks = False  # every NACK gets the same answer again


class ControlPlane:
    def __init__(self, output):
        self.output = output
        self.lock = threading.RLock()
        self.streams = {}  # id -> Stream, oldest first
        self.stream_ids = itertools.count(1)
        self.nonces = itertools.count(1)
        self.generations = itertools.count(1)
        self.stores = {}  # type_url -> ResourceStore
        self.ignore_all = False
        self.ignored_types = set()
        self.delay_s = 0.0
        self.checker = RequestChecker()
        self.lrs_streams = {}  # id -> Stream, oldest first

    # --- the LRS call: bytes in, bytes out, the test decides ---

    def stream_load_stats(self, request_iterator, context):
        with self.lock:
            stream = Stream(next(self.stream_ids))
            self.lrs_streams[stream.id] = stream
        if not context.add_callback(lambda: self._on_lrs_call_done(stream)):
            self._on_lrs_call_done(stream)
            return
        self.output.emit({"event": "lrs_stream_opened", "stream": stream.id})
        threading.Thread(
            target=self._read_lrs_requests, args=(stream, request_iterator), name=f"lrs-{stream.id}", daemon=True
        ).start()
        yield from _responses(stream, context)

    def _read_lrs_requests(self, stream, request_iterator):
        try:
            for request in request_iterator:
                data = base64.b64encode(request).decode()
                self.output.emit({"event": "lrs_request", "stream": stream.id, "data_b64": data})
        except grpc.RpcError:
            pass
        except Exception:
            traceback.print_exc()

    def _on_lrs_call_done(self, stream):
        with self.lock:
            stream.open = False
            self.lrs_streams.pop(stream.id, None)
        stream.outbox.put(None)
        closed_by = "server" if stream.close_status is not None else "peer"
        self.output.emit({"event": "lrs_stream_closed", "stream": stream.id, "closed_by": closed_by})

    # --- the ADS call ---

    def stream_aggregated_resources(self, request_iterator, context):
        with self.lock:
            stream = Stream(next(self.stream_ids))
            self.streams[stream.id] = stream
        if not context.add_callback(lambda: self._on_call_done(stream)):
            self._on_call_done(stream)  # the call ended before it got here
            return
        metadata = {}
        for key, value in context.invocation_metadata():
            metadata[key] = base64.b64encode(value).decode() if isinstance(value, bytes) else value
        self.output.emit({"event": "stream_opened", "stream": stream.id, "metadata": metadata})
        threading.Thread(
            target=self._read_requests, args=(stream, request_iterator), name=f"stream-{stream.id}", daemon=True
        ).start()
        yield from _responses(stream, context)

    def _read_requests(self, stream, request_iterator):
        try:
            for request in request_iterator:
                self.output.emit(request_event(stream.id, request))
                with self.lock:
                    for message in self.checker.check(stream.id, request):
                        self.output.emit({"event": "violation", "stream": stream.id, "message": message})
                    stream.subscriptions[request.type_url] = list(request.resource_names)
                    self._maybe_answer(stream, request.type_url, nack=request.HasField("error_detail"))
        except grpc.RpcError:
            pass  # the call ended: _on_call_done reports it
        except Exception:
            traceback.print_exc()

    def _on_call_done(self, stream):
        with self.lock:
            stream.open = False
            self.streams.pop(stream.id, None)
            self.checker.stream_closed(stream.id)
        stream.outbox.put(None)
        closed_by = "server" if stream.close_status is not None else "peer"
        self.output.emit({"event": "stream_closed", "stream": stream.id, "closed_by": closed_by})

    # --- sending ---

    def _enqueue(self, stream, data, event):
        # Reported before it can reach the client: the event line comes
        # before that of any request answering the response.
        self.output.emit({"event": "response_sent", "stream": stream.id, **event})
        if "type_url" in event:
            self.checker.response_sent(stream.id, event["type_url"], event["version_info"], event["nonce"])
        stream.outbox.put(data)

    def _next_nonce(self):
        return f"nonce-{next(self.nonces)}"

    def _maybe_answer(self, stream, type_url, nack=False):
        """Automatic answer to the stream's subscription of type_url (lock held)."""
        store = self.stores.get(type_url)
        names = stream.subscriptions.get(type_url)
        if store is None or not names or not stream.open:
            return
        if self.ignore_all or type_url in self.ignored_types:
            return
        key = (store.generation, tuple(sorted(set(names))))
        if stream.auto_sent.get(type_url) == key and not (nack and store.answer_nacks):
            return  # an ACK / NACK of what we sent
        stream.auto_sent[type_url] = key
        wanted = list(dict.fromkeys(names))
        resources = [store.resources[n] for n in wanted if n in store.resources]
        errors = [store.resource_errors[n] for n in wanted if n in store.resource_errors]
        nonce = self._next_nonce()
        data = encode_response(type_url, store.version, nonce, resources, errors, "")
        event = {"type_url": type_url, "version_info": store.version, "nonce": nonce, "auto": True}
        if self.delay_s > 0:
            timer = threading.Timer(self.delay_s, self._send_later, args=(stream, data, event))
            timer.daemon = True
            timer.start()
        else:
            self._enqueue(stream, data, event)

    def _send_later(self, stream, data, event):
        with self.lock:
            if stream.open:
                self._enqueue(stream, data, event)

    def _answer_all(self, type_url=None):
        for stream in list(self.streams.values()):
            for subscribed in list(stream.subscriptions):
                if type_url is None or subscribed == type_url:
                    self._maybe_answer(stream, subscribed)

    def _stream(self, command, streams=None):
        """The stream a command names, or the most recently opened one still open."""
        streams = self.streams if streams is None else streams
        stream_id = command.get("stream")
        if stream_id is None:
            open_streams = [s for s in streams.values() if s.open]
            if not open_streams:
                raise CommandError("no open stream")
            return open_streams[-1]
        stream = streams.get(stream_id)
        if stream is None or not stream.open:
            raise CommandError(f"stream {stream_id} is not open")
        return stream

    # --- commands (called with the lock held) ---

    def cmd_send(self, command):
        stream = self._stream(command)
        wrap = bool(command.get("wrap_in_resource", False))
        resources = [encode_resource(r, wrap) for r in command.get("resources", [])]
        nonce = command.get("nonce") or self._next_nonce()
        data = encode_response(
            command.get("type_url", ""),
            command.get("version_info", ""),
            nonce,
            resources,
            command.get("resource_errors", []),
            command.get("control_plane", ""),
        )
        event = {
            "type_url": command.get("type_url", ""),
            "version_info": command.get("version_info", ""),
            "nonce": nonce,
            "auto": False,
        }
        self._enqueue(stream, data, event)
        return {"stream": stream.id, "nonce": nonce}

    def cmd_send_raw(self, command):
        stream = self._stream(command)
        self._enqueue(stream, _b64(command, "data_b64"), {"raw": True, "auto": False})
        return {"stream": stream.id}

    def cmd_lrs_send(self, command):
        stream = self._stream(command, self.lrs_streams)
        stream.outbox.put(_b64(command, "data_b64"))
        return {"stream": stream.id}

    def cmd_lrs_close_stream(self, command):
        stream = self._stream(command, self.lrs_streams)
        self._close(stream, command)
        return {"stream": stream.id}

    def _close(self, stream, command):
        stream.open = False
        stream.close_status = (status_code(command.get("code", 0)), command.get("message", ""))
        stream.outbox.put(_CLOSE)

    def cmd_close_stream(self, command):
        stream = self._stream(command)
        self._close(stream, command)
        return {"stream": stream.id}

    def cmd_close_all_streams(self, command):
        closed = [s for s in self.streams.values() if s.open]
        for stream in closed:
            self._close(stream, command)
        return {"streams": [s.id for s in closed]}

    def cmd_set_resources(self, command):
        type_url = command.get("type_url")
        if not type_url:
            raise CommandError("set_resources: type_url missing")
        wrap = bool(command.get("wrap_in_resource", False))
        resources = {}
        for name, spec in command.get("resources", {}).items():
            resources[name] = encode_resource(dict(spec, wrapper_name=spec.get("wrapper_name", name)), wrap)
        errors = {e.get("name", ""): e for e in command.get("resource_errors", [])}
        self.stores[type_url] = ResourceStore(
            next(self.generations), command.get("version_info", ""), resources, errors
        )
        self.stores[type_url].answer_nacks = bool(command.get("answer_nacks", False))
        self._answer_all(type_url)
        return {}

    def cmd_clear_resources(self, command):
        self.stores.pop(command.get("type_url", ""), None)
        return {}

    def cmd_ignore_requests(self, command):
        ignore = bool(command.get("ignore", True))
        type_url = command.get("type_url") or ""
        if not type_url:
            self.ignore_all = ignore
            if not ignore:
                self.ignored_types.clear()
        elif ignore:
            self.ignored_types.add(type_url)
        else:
            self.ignored_types.discard(type_url)
        if not ignore:
            self._answer_all()  # a server that wakes up answers what is pending
        return {}

    def cmd_delay_responses(self, command):
        self.delay_s = max(0, int(command.get("delay_ms", 0))) / 1000.0
        return {}

    def cmd_streams(self, command):
        return {"streams": [s.id for s in self.streams.values() if s.open]}

    def cmd_ping(self, command):
        return {}


def status_code(number):
    for code in grpc.StatusCode:
        if code.value[0] == int(number):
            return code
    raise CommandError(f"unknown status code {number}")


class Server:
    """The grpcio server, the forwarder in front of it, and the command loop."""

    def __init__(self, args, output):
        self.output = output
        self.control_plane = ControlPlane(output)
        self.grpc_server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=MAX_STREAMS),
            # Clients under test may send keepalive PINGs as often as they
            # like: no GOAWAY "too_many_pings".
            options=[("grpc.http2.max_ping_strikes", 0)],
        )
        handler = grpc.stream_stream_rpc_method_handler(
            self.control_plane.stream_aggregated_resources,
            request_deserializer=discovery_pb2.DiscoveryRequest.FromString,
            response_serializer=lambda data: data,  # responses are serialized already
        )
        service, method = ADS_METHOD[1:].split("/")
        lrs_handler = grpc.stream_stream_rpc_method_handler(
            self.control_plane.stream_load_stats,
            request_deserializer=None,  # the test decodes the bytes
            response_serializer=lambda data: data,
        )
        lrs_service, lrs_method = LRS_METHOD[1:].split("/")
        self.grpc_server.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(service, {method: handler}),
                grpc.method_handlers_generic_handler(lrs_service, {lrs_method: lrs_handler}),
            ]
        )
        if args.tls_cert:
            credentials = server_credentials(args.tls_cert, args.tls_key, args.client_ca)
            backend_port = self.grpc_server.add_secure_port("127.0.0.1:0", credentials)
        else:
            backend_port = self.grpc_server.add_insecure_port("127.0.0.1:0")
        self.grpc_server.start()
        self.forwarder = TcpForwarder(args.host, args.port, ("127.0.0.1", backend_port))
        self.forwarder.start_listening()

    def run_commands(self, command_file):
        for raw in command_file:
            line = raw.strip()
            if not line:
                continue
            self.output.emit(self.execute(line))
        # The test closed our input (it ended or crashed): leave at once,
        # without waiting for grpcio's threads.
        self.output.drain(timeout_s=2)
        os._exit(0)

    def execute(self, line):
        try:
            command = json.loads(line)
        except ValueError as e:
            return {"ok": False, "error": f"not JSON: {e}"}
        if not isinstance(command, dict):
            return {"ok": False, "error": "a command is a JSON object"}
        reply = {"ok": True}
        try:
            name = command.get("cmd", "")
            if name == "stop_listening":
                self.forwarder.stop_listening()
            elif name == "start_listening":
                self.forwarder.start_listening()
            elif name == "drop_connections":
                reply["connections"] = self.forwarder.drop_connections()
            elif name == "freeze_connections":
                reply["connections"] = self.forwarder.freeze_connections()
            else:
                method = getattr(self.control_plane, "cmd_" + name, None)
                if method is None:
                    raise CommandError(f"unknown command {name!r}")
                with self.control_plane.lock:
                    reply.update(method(command))
        except CommandError as e:
            reply = {"ok": False, "error": str(e)}
        except Exception as e:
            traceback.print_exc()
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        if "id" in command:
            reply["id"] = command["id"]
        return reply


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--client-ca")
    parser.add_argument("--command-fd", type=int, default=0)
    args = parser.parse_args()
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    if args.client_ca and not args.tls_cert:
        parser.error("--client-ca needs --tls-cert and --tls-key")
    command_file = os.fdopen(args.command_fd, "rb")
    output = Output()
    server = Server(args, output)
    output.emit_line(f"PORT {server.forwarder.port}")
    server.run_commands(command_file)


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        os._exit(1)
