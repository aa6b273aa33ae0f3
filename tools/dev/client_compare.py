"""uxds's xDS client (`uxds call`) beside gRPC C++ 1.51's
(tests/peers/grpc_cpp_xds_client, callback API, Debian's libgrpc++): unary
grpc.testing.TestService/UnaryCall through an `xds:///bench` channel, the
same backend and the same xDS config for both, alternating rounds in one
run; prints medians and the ratios (uxds / gRPC).

    client_compare.py --uxds build/tools/uxds/uxds \
        --grpc-client build/tests/peers/grpc_cpp_xds_client \
        [--rounds 3] [--concurrency 1,16,64] [--seconds 2 | --calls N]

One backend (`uxds test-server --loops 1`: one serving thread, so on a small
machine the client keeps a core) and `uxds control-plane` serving a
Listener / RouteConfiguration / Cluster / ClusterLoadAssignment that send
`xds:///bench` to it, from a temporary directory. Both clients read the
same bootstrap ($GRPC_XDS_BOOTSTRAP) and make every call with
wait_for_ready and the same deadline; the request is an empty SimpleRequest
(response_size 0) for both.

Throughput (figure 2e). For each concurrency C, both clients make the same
number of calls N per round, C in flight. Without --calls, N is chosen from
one warm-up run of each: the slower client's round lasts about --seconds,
and the faster one's at least a quarter of that (each run also includes
its process start and getting the xDS config, which a too short run would
overweight). Per run:
  - calls_per_s: from the client's own summary (first call start to last
    call end, so it includes getting the xDS config and connecting);
  - cpu_us_per_call: (ru_utime + ru_stime of the client process, from
    os.wait4) / N, in microseconds: everything the process did, start-up
    included;
  - p50_us, p99_us: call latency percentiles from the summary (uxds: a
    histogram, within 0.4%; gRPC client: exact).
Rounds alternate the clients, and which goes first, so that drift in the
machine's load affects both alike.

Start-up (figure 2i). Each round also spawns each client with one call and
measures the wall time from spawning it to its exit: process start, reading
the bootstrap, the ADS stream, LDS/RDS/CDS/EDS, connecting and the one call
(and the process's exit).

The last line of stdout is one JSON object (what tools/dev/bench_report.py
parses), with client names "uxds" and "grpc-c++-1.51" and concurrencies as
string keys:
  {"clients": ["uxds", "grpc-c++-1.51"],
   "calls": {"1": N, ...},                    # calls per run, per concurrency
   "rounds": R,
   "calls_per_s": {name: {"1": median, ...}},
   "cpu_us_per_call": {name: {conc: median}},
   "p50_us": {name: {conc: median}},
   "p99_us": {name: {conc: median}},
   "start_to_first_call_ms": {name: median},
   "start_cpu_ms": {name: median},             # CPU of that one-call process
   "ratios": {"calls_per_s": {conc: uxds/gRPC}, "cpu_us_per_call": {conc: ...},
              "p50_us": {conc: ...}, "p99_us": {conc: ...},
              "start_to_first_call_ms": uxds/gRPC},
   "runs": {name: {conc: [{"calls_per_s", "cpu_us_per_call", "p50_us",
                           "p99_us"} or {} for a run with a failed call, ...],
                   "start": [{"ms", "cpu_ms"} of each run whose call succeeded]}},
   "errors": {name: count}}                    # failed calls, bad exits
Exit status 0 when every call of every run succeeded, 1 otherwise.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

UXDS = "uxds"
GRPC = "grpc-c++-1.51"
TARGET = "bench"
WARM_UP_CALLS = 5000
MAX_CALLS = 2_000_000  # the gRPC client keeps each call's latency: 16 MB


def write_resources(directory, backend_port):
    """The xDS config: xds:///bench -> one cluster -> the backend."""
    ads = {"ads": {}}
    resources = {
        "listener": {
            "@type": "type.googleapis.com/envoy.config.listener.v3.Listener",
            "name": TARGET,
            "api_listener": {"api_listener": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network."
                         "http_connection_manager.v3.HttpConnectionManager",
                "rds": {"config_source": ads, "route_config_name": "bench-route"},
                "http_filters": [{"name": "router", "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
            }},
        },
        "route": {
            "@type": "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
            "name": "bench-route",
            "virtual_hosts": [{"name": TARGET, "domains": ["*"], "routes": [
                {"match": {"prefix": ""}, "route": {"cluster": "bench-cluster"}}]}],
        },
        "cluster": {
            "@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            "name": "bench-cluster",
            "type": "EDS",
            "eds_cluster_config": {"eds_config": ads, "service_name": "bench-endpoints"},
            "lb_policy": "ROUND_ROBIN",
        },
        "endpoints": {
            "@type": "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
            "cluster_name": "bench-endpoints",
            "endpoints": [{
                "locality": {"region": "r1", "zone": "z1"},
                "load_balancing_weight": 1,
                "lb_endpoints": [{"endpoint": {"address": {"socket_address": {
                    "address": "127.0.0.1", "port_value": backend_port}}}}],
            }],
        },
    }
    for name, resource in resources.items():
        with open(os.path.join(directory, f"{name}.json"), "w") as f:
            json.dump(resource, f)
    return len(resources)


def start_backend(uxds):
    proc = subprocess.Popen([uxds, "test-server", "--loops", "1"], stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.startswith("PORT "):
            return proc, int(line.split()[1])
    raise RuntimeError("uxds test-server did not print its port")


def start_control_plane(uxds, directory, resource_count):
    """Starts `uxds control-plane` and returns it and its port once it serves
    every resource. Its stdout (a line per request) is drained by a thread so
    that it never blocks; file errors are kept in `problems`."""
    proc = subprocess.Popen([uxds, "control-plane", "--dir", directory, "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, text=True)
    ready = threading.Event()
    state = {"port": None, "problems": []}

    def drain():
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "listening":
                state["port"] = int(event["address"].rsplit(":", 1)[1])
            elif event.get("event") == "snapshot" and event.get("resources") == resource_count:
                ready.set()
            elif event.get("event") == "file_error":
                state["problems"].append(line.strip())
        ready.set()  # it exited: do not wait for it

    threading.Thread(target=drain, daemon=True).start()
    if not ready.wait(30) or state["port"] is None or state["problems"] or proc.poll() is not None:
        proc.kill()
        raise RuntimeError(f"uxds control-plane did not serve the config: {state['problems']}")
    return proc, state["port"]


def run_client(argv, env, timeout):
    """Runs one client to its exit: (summary or None, exit code, CPU seconds,
    wall seconds from spawn to exit, stderr)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        killer = threading.Timer(timeout, proc.kill)
        killer.start()
        try:
            # wait4 instead of Popen.wait: the child's own rusage.
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        wall = time.monotonic() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        summary = None
        for line in out.read().decode(errors="replace").splitlines():
            if line.startswith('{"summary"'):
                summary = json.loads(line)["summary"]
        return summary, proc.returncode, usage.ru_utime + usage.ru_stime, wall, err.read().decode(
            errors="replace")


class Clients:
    def __init__(self, args, env):
        self.args = args
        self.env = env
        self.errors = {UXDS: 0, GRPC: 0}
        self.stderr_lines = {UXDS: {}, GRPC: {}}  # distinct lines -> count

    def argv(self, name, calls, concurrency):
        deadline = str(self.args.deadline_ms)
        if name == UXDS:
            return [self.args.uxds, "call", "--summary-only", "--wait-for-ready", "--deadline-ms",
                    deadline, "-n", str(calls), "--concurrency", str(concurrency),
                    "--loops", str(self.args.uxds_loops), f"xds:///{TARGET}"]
        return [self.args.grpc_client, "--calls", str(calls), "--concurrency", str(concurrency),
                "--deadline-ms", deadline, "--response-size", "0", f"xds:///{TARGET}"]

    def run(self, name, calls, concurrency):
        """One run: (summary, CPU seconds, wall seconds); the summary is None
        unless every call succeeded (a failed call can end sooner than a
        served one, so a run with failures gives no figure). Failures are
        counted in self.errors and reported on stderr."""
        timeout = 120 + calls / 1000  # even a slow client makes 1000 calls/s
        summary, code, cpu, wall, stderr = run_client(self.argv(name, calls, concurrency), self.env,
                                                      timeout)
        for line in stderr.splitlines():
            self.stderr_lines[name][line] = self.stderr_lines[name].get(line, 0) + 1
        ok = summary["by_status"].get("OK", 0) if summary else 0
        if summary is None or code != 0 or ok != calls:
            failed = calls - ok if summary else calls
            self.errors[name] += max(failed, 1)
            sys.stderr.write(f"{name} --concurrency {concurrency} -n {calls}: exit {code}, "
                             f"{failed} failed: {json.dumps(summary)}\n{stderr[-2000:]}\n")
            return None, cpu, wall
        return summary, cpu, wall


def median_of(runs, key):
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def ratio(a, b):
    return a / b if a is not None and b else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--uxds", required=True,
                        help="the uxds tool (runs test-server, control-plane and call)")
    parser.add_argument("--grpc-client", required=True, help="tests/peers/grpc_cpp_xds_client")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", default="1,16,64", help="calls in flight, comma-separated")
    parser.add_argument("--seconds", type=float, default=2.0,
                        help="about how long the slower client's round lasts (N from a warm-up)")
    parser.add_argument("--calls", type=int, help="calls per run at every concurrency (no warm-up)")
    parser.add_argument("--deadline-ms", type=int, default=5000)
    parser.add_argument("--uxds-loops", type=int, default=2,
                        help="loops uxds call makes its calls on (its channel's and LoopChannels)")
    parser.add_argument("--perf-record",
                        help="instead of measuring: one run of `uxds call` (--calls at the first --concurrency)"
                             " under `perf record`, its data written to this file")
    args = parser.parse_args()
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    names = [UXDS, GRPC]

    workdir = tempfile.mkdtemp(prefix="client_compare.")
    backend = control_plane = None
    try:
        backend, backend_port = start_backend(args.uxds)
        xds_dir = os.path.join(workdir, "xds")
        os.mkdir(xds_dir)
        count = write_resources(xds_dir, backend_port)
        control_plane, cp_port = start_control_plane(args.uxds, xds_dir, count)
        bootstrap = os.path.join(workdir, "bootstrap.json")
        with open(bootstrap, "w") as f:
            json.dump({"xds_servers": [{"server_uri": f"127.0.0.1:{cp_port}",
                                        "channel_creds": [{"type": "insecure"}],
                                        "server_features": ["xds_v3"]}],
                       "node": {"id": "client-compare"}}, f)
        env = dict(os.environ, GRPC_XDS_BOOTSTRAP=bootstrap)
        # Both clients read the file: no inline config left from the caller.
        env.pop("GRPC_XDS_BOOTSTRAP_CONFIG", None)
        clients = Clients(args, env)
        if args.perf_record:
            return perf_record(args, env, concurrencies[0])
        calls, runs, starts = measure(args, clients, names, concurrencies)
    finally:
        for proc in (control_plane, backend):
            if proc is not None and proc.poll() is None:
                proc.terminate()
        for proc in (control_plane, backend):
            if proc is None:
                continue
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    return report(args, clients, names, concurrencies, calls, runs, starts)


def perf_record(args, env, concurrency):
    """Where uxds call's time goes (./dev bench profiles a missed client
    target with it): the same run as a measured one, under perf."""
    calls = args.calls or 100_000
    argv = ["perf", "record", "-q", "-F", "999", "-o", args.perf_record, "--"] + Clients(args, env).argv(
        UXDS, calls, concurrency)
    completed = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if completed.returncode != 0:
        sys.stderr.write(completed.stderr[-2000:])
    return completed.returncode


def measure(args, clients, names, concurrencies):
    calls = {}
    for c in concurrencies:
        if args.calls:
            calls[c] = args.calls
            continue
        # Warm-up (also the first run of each binary: page cache, lazy
        # binding) and the rate N is chosen from.
        rates = []
        for name in names:
            summary, _, _ = clients.run(name, WARM_UP_CALLS, c)
            rates.append(summary["calls_per_s"] if summary and summary["calls_per_s"] > 0 else 1000)
        n = max(args.seconds * min(rates), args.seconds / 4 * max(rates), 100)
        calls[c] = int(min(n, MAX_CALLS))

    runs = {name: {c: [] for c in concurrencies} for name in names}
    starts = {name: [] for name in names}
    for round_index in range(args.rounds):
        # Who goes first changes every round.
        order = names if round_index % 2 == 0 else names[::-1]
        for name in order:
            summary, cpu, wall = clients.run(name, 1, 1)
            if summary is not None:  # only a run whose call succeeded measures the start
                starts[name].append({"ms": round(wall * 1000, 2), "cpu_ms": round(cpu * 1000, 2)})
        for c in concurrencies:
            for name in order:
                summary, cpu, _ = clients.run(name, calls[c], c)
                if summary is None:
                    runs[name][c].append({})
                    continue
                runs[name][c].append({
                    "calls_per_s": summary["calls_per_s"],
                    "cpu_us_per_call": round(cpu * 1e6 / calls[c], 2),
                    "p50_us": summary["latency_us"]["p50"],
                    "p99_us": summary["latency_us"]["p99"],
                })
    return calls, runs, starts


def report(args, clients, names, concurrencies, calls, runs, starts):
    keys = ["calls_per_s", "cpu_us_per_call", "p50_us", "p99_us"]
    medians = {key: {name: {str(c): median_of(runs[name][c], key) for c in concurrencies}
                     for name in names} for key in keys}
    start_ms = {name: median_of(starts[name], "ms") for name in names}
    start_cpu_ms = {name: median_of(starts[name], "cpu_ms") for name in names}
    ratios = {key: {str(c): ratio(medians[key][UXDS][str(c)], medians[key][GRPC][str(c)])
                    for c in concurrencies} for key in keys}
    ratios["start_to_first_call_ms"] = ratio(start_ms[UXDS], start_ms[GRPC])

    def fmt(value, spec):
        return format(value, spec) if value is not None else "-"

    print(f"unary calls through xds:///{TARGET} (uxds control-plane, one uxds test-server), "
          f"{args.rounds} rounds, medians; ratio = uxds / gRPC")
    print(f"  {'in flight':>9} {'calls/run':>10} {'client':<14} {'calls/s':>10} {'CPU us/call':>12} "
          f"{'p50 us':>8} {'p99 us':>8}")
    for c in concurrencies:
        for name in names + ["ratio"]:
            row = medians if name != "ratio" else None
            values = [row[key][name][str(c)] if row else ratios[key][str(c)] for key in keys]
            if name == "ratio":
                cells = [fmt(v, ".2f") for v in values]
            else:
                cells = [fmt(values[0], ",.0f"), fmt(values[1], ".1f"), fmt(values[2], ".0f"),
                         fmt(values[3], ".0f")]
            print(f"  {c:>9} {calls[c]:>10,} {name:<14} {cells[0]:>10} {cells[1]:>12} "
                  f"{cells[2]:>8} {cells[3]:>8}")
    print("process start to first successful call (one call, spawn to exit):")
    for name in names:
        runs_ms = ", ".join(f"{s['ms']:.1f}" for s in starts[name])
        print(f"  {name:<14} median {fmt(start_ms[name], '.1f'):>7} ms  (CPU "
              f"{fmt(start_cpu_ms[name], '.1f')} ms)   runs: {runs_ms}")
    print(f"  ratio uxds / gRPC: {fmt(ratios['start_to_first_call_ms'], '.2f')}")
    print(f"errors: {clients.errors}")
    for name in names:
        for line, count in list(clients.stderr_lines[name].items())[:10]:
            sys.stderr.write(f"{name} stderr ({count}x): {line[:300]}\n")

    print(json.dumps({
        "clients": names,
        "calls": {str(c): calls[c] for c in concurrencies},
        "rounds": args.rounds,
        **medians,
        "start_to_first_call_ms": start_ms,
        "start_cpu_ms": start_cpu_ms,
        "ratios": ratios,
        "runs": {name: {**{str(c): runs[name][c] for c in concurrencies}, "start": starts[name]}
                 for name in names},
        "errors": clients.errors,
    }))
    return 0 if sum(clients.errors.values()) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
