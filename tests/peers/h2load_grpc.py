#!/usr/bin/python3
"""Drives gRPC unary calls at a server with h2load and reports one JSON line.

  /usr/bin/python3 tests/peers/h2load_grpc.py --target 127.0.0.1:PORT
      [--method UnaryCall|EmptyCall] [--seconds 5] [--warm-up-seconds 1]
      [--connections 1] [--streams 10] [--threads 1]
      [--request-size 0] [--response-size 0] [--tls] [--header k:v ...]

prints e.g.
  {"method": "UnaryCall", "seconds": 5.0, "connections": 1, "streams": 10,
   "requests_per_second": 52332.5, "requests": 104665, "succeeded": 104665,
   "failed": 0, "errored": 0, "timeout": 0, "status_2xx": 104665,
   "status_non_2xx": 0, "latency_us": {"min": 22, "max": 5540, "mean": 145,
   "sd": 114}, "grpc_status_probe": 0}
and exits 0 when every request succeeded and the probe saw grpc-status 0.

h2load knows HTTP, not gRPC: it POSTs a fixed body (a gRPC-framed
SimpleRequest, see grpc_frame()) and counts a request as succeeded on an
HTTP 2xx :status. A gRPC error arrives with HTTP 200 and the status in the
trailers (grpc-status), so h2load counts it as a success. To catch a server
that fails every call, one call is made first with nghttp, whose verbose
output shows the trailers, and its grpc-status is reported as
grpc_status_probe; errors that only happen under load stay invisible to
h2load.

Importable: run_h2load_grpc(...) returns the same dict; run_h2load(...) is the
same load for any URL (GET, or POST of a file), e.g. a static file server.
"""

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile

from peer_util import varint

SERVICE_PATH = "/grpc.testing.TestService/"
GRPC_HEADERS = ["content-type: application/grpc", "te: trailers"]


def simple_request(request_size, response_size):
    """grpc.testing.SimpleRequest{response_size, payload{body: request_size zeros}}.

    Encoded by hand (field 2 varint, field 3 Payload{field 2 bytes}) so the
    helper needs no protobuf module.
    """
    message = b""
    if response_size:
        message += b"\x10" + varint(response_size)
    if request_size:
        payload = b"\x12" + varint(request_size) + bytes(request_size)
        message += b"\x1a" + varint(len(payload)) + payload
    return message


def grpc_frame(message):
    """gRPC length-prefixed message: uncompressed flag, 4-byte big-endian length."""
    return b"\x00" + len(message).to_bytes(4, "big") + message


_FINISHED = re.compile(r"finished in [\d.]+\w+, ([\d.]+) req/s")
_REQUESTS = re.compile(
    r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout"
)
_STATUS = re.compile(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx")
_REQUEST_TIME = re.compile(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)")
_UNIT_US = {"us": 1, "ms": 1000, "s": 1000000}


def _to_us(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not m:
        raise ValueError(f"h2load latency {text!r}: unknown unit")
    return round(float(m.group(1)) * _UNIT_US[m.group(2)])


def parse_h2load_output(text):
    """The figures of h2load's summary, or ValueError naming what is missing."""
    result = {}
    m = _FINISHED.search(text)
    if not m:
        raise ValueError("h2load output: no 'finished in' line")
    result["requests_per_second"] = float(m.group(1))
    m = _REQUESTS.search(text)
    if not m:
        raise ValueError("h2load output: no 'requests:' line")
    total, _, _, succeeded, failed, errored, timeout = (int(g) for g in m.groups())
    result.update(requests=total, succeeded=succeeded, failed=failed, errored=errored, timeout=timeout)
    m = _STATUS.search(text)
    if not m:
        raise ValueError("h2load output: no 'status codes:' line")
    codes = [int(g) for g in m.groups()]
    result["status_2xx"] = codes[0]
    result["status_non_2xx"] = sum(codes[1:])
    m = _REQUEST_TIME.search(text)
    if m:
        result["latency_us"] = dict(zip(["min", "max", "mean", "sd"], (_to_us(g) for g in m.groups())))
    return result


def probe_grpc_status(url, body_path, headers):
    """grpc-status of one call made with nghttp, or None if none arrived."""
    argv = ["nghttp", "-v", "-d", body_path]
    for header in headers:
        argv += ["-H", header]
    completed = subprocess.run(argv + [url], capture_output=True, timeout=30)
    m = re.search(rb"recv \(stream_id=\d+\) grpc-status: (\d+)", completed.stdout)
    return int(m.group(1)) if m else None


def latency_percentiles(log_path):
    """p50/p90/p99/p99.9 (microseconds, nearest rank) of the requests h2load
    logged that got a 2xx response.

    h2load --log-file writes one line per request of the measured period
    (warm-up requests are not logged): start time, HTTP status (-1 when the
    request failed), duration in microseconds, tab-separated. None when no
    request succeeded.
    """
    durations = []
    with open(log_path) as f:
        for line in f:
            fields = line.split("\t")
            if len(fields) >= 3 and fields[1].startswith("2"):
                durations.append(int(fields[2]))
    if not durations:
        return None
    durations.sort()

    def at(fraction):
        return durations[max(0, math.ceil(fraction * len(durations)) - 1)]

    return {"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "p999": at(0.999)}


def run_h2load(url, seconds=5.0, warm_up_seconds=1.0, connections=1, streams=10, threads=1,
               body_path=None, headers=(), percentiles=False):
    """h2load against url for a measured period; its figures as a dict.

    With body_path each request is a POST of that file, else a GET. With
    percentiles, every request's latency is logged and the dict gains
    latency_percentiles_us (see latency_percentiles()).
    """
    argv = [
        "h2load",
        f"--duration={round(seconds * 1000)}ms",
        f"--warm-up-time={round(warm_up_seconds * 1000)}ms",
        f"--clients={connections}",
        f"--max-concurrent-streams={streams}",
        f"--threads={threads}",
    ]
    if body_path:
        argv.append(f"--data={body_path}")  # -d: also makes the method POST
    for header in headers:
        argv += ["-H", header]
    with tempfile.NamedTemporaryFile(prefix="uxds-h2load-", suffix=".log") as log:
        if percentiles:
            argv.append(f"--log-file={log.name}")
        completed = subprocess.run(argv + [url], capture_output=True, text=True,
                                   timeout=seconds + warm_up_seconds + 60)
        if completed.returncode != 0:
            raise RuntimeError(f"h2load exited {completed.returncode}: {completed.stderr.strip()}")
        result = {"seconds": seconds, "connections": connections, "streams": streams}
        result.update(parse_h2load_output(completed.stdout))
        if percentiles:
            result["latency_percentiles_us"] = latency_percentiles(log.name)
    return result


def run_h2load_grpc(
    target,
    method="UnaryCall",
    seconds=5.0,
    warm_up_seconds=1.0,
    connections=1,
    streams=10,
    threads=1,
    request_size=0,
    response_size=0,
    tls=False,
    extra_headers=(),
    percentiles=False,
):
    """Runs h2load against target (host:port); returns the parsed figures."""
    if method == "UnaryCall":
        message = simple_request(request_size, response_size)
    elif method == "EmptyCall":
        message = b""
    else:
        raise ValueError(f"method {method!r}: expected UnaryCall or EmptyCall")
    url = ("https://" if tls else "http://") + target + SERVICE_PATH + method
    headers = GRPC_HEADERS + list(extra_headers)
    with tempfile.NamedTemporaryFile(prefix="uxds-h2load-", suffix=".grpc") as body:
        body.write(grpc_frame(message))
        body.flush()
        probe = probe_grpc_status(url, body.name, headers)
        figures = run_h2load(url, seconds=seconds, warm_up_seconds=warm_up_seconds,
                             connections=connections, streams=streams, threads=threads,
                             body_path=body.name, headers=headers, percentiles=percentiles)
    result = {"method": method}
    result.update(figures)
    result["grpc_status_probe"] = probe
    return result


def main():
    parser = argparse.ArgumentParser(description="gRPC unary load with h2load; prints one JSON line")
    parser.add_argument("--target", required=True, help="host:port")
    parser.add_argument("--method", default="UnaryCall", choices=["UnaryCall", "EmptyCall"])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured duration")
    parser.add_argument("--warm-up-seconds", type=float, default=1.0)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--streams", type=int, default=10, help="concurrent streams per connection")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--request-size", type=int, default=0)
    parser.add_argument("--response-size", type=int, default=0)
    parser.add_argument("--tls", action="store_true", help="https (h2load does not verify the certificate)")
    parser.add_argument("--header", action="append", default=[], metavar="K:V")
    args = parser.parse_args()
    try:
        result = run_h2load_grpc(
            args.target,
            method=args.method,
            seconds=args.seconds,
            warm_up_seconds=args.warm_up_seconds,
            connections=args.connections,
            streams=args.streams,
            threads=args.threads,
            request_size=args.request_size,
            response_size=args.response_size,
            tls=args.tls,
            extra_headers=args.header,
        )
    except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
        print(json.dumps({"error": str(e)}), flush=True)
        return 1
    print(json.dumps(result), flush=True)
    ok = result["requests"] > 0 and result["succeeded"] == result["requests"] and result["grpc_status_probe"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
