"""The same h2load load against the uxds server (once per runtime backend and
loop count), the gRPC C++ 1.51 server and, optionally, h2o serving a static
file, alternating rounds in one run; prints medians and the ratios.

    h2load_compare.py --uxds build/tools/uxds/uxds \\
        --grpc build/tests/peers/grpc_cpp_test_server [--h2o /usr/bin/h2o] \\
        [--rounds 3] [--seconds 5] [--shapes 1x10,4x64] \\
        [--backends io_uring,epoll] [--loops 1,2] [--percentiles]

Each server runs as its own process on 127.0.0.1. The gRPC servers answer
grpc.testing.TestService/UnaryCall; a uxds server's backend is forced with
UXDS_RUNTIME. h2o (Debian's, one thread) serves a 5-byte file over cleartext
HTTP/2 to GET requests: not the same work, but the HTTP/2 ceiling of this
machine under the same load generator. Rounds alternate (uxds io_uring, uxds
epoll, gRPC, h2o, ...) so that drift in the machine's load affects all alike.
A shape is CONNECTIONSxSTREAMS; --connections/--streams give a single one.

The last line printed is JSON:
  {"shapes": ["1x10", ...],
   "medians_rps": {shape: {server: rps}},
   "latency_us": {shape: {server: {"p50": us, "p99": us}}}   (--percentiles;
       each the median over rounds of that round's percentile)
   "ratios": {shape: {label: ratio}}, "runs": {shape: {server: [rps...]}},
   "errors": {server: count}}
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "peers"))
from h2load_grpc import run_h2load, run_h2load_grpc  # noqa: E402

H2O_NAME = "h2o-static"
GRPC_NAME = "grpc-c++-1.51"
H2O_CONFIG = """\
listen:
  host: 127.0.0.1
  port: {port}
num-threads: 1
error-log: {dir}/error.log
hosts:
  default:
    paths:
      /:
        file.dir: {dir}/www
"""


def start(argv, env=None):
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    for line in proc.stdout:
        if line.startswith("PORT "):
            return proc, int(line.split()[1])
    raise RuntimeError(f"{argv[0]} did not print its port")


def stop(processes):
    """SIGTERM to every process, then a wait for each (SIGKILL after 10 s):
    one that hangs does not keep the others running."""
    for proc in processes:
        if proc.poll() is None:
            proc.terminate()
    for proc in processes:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_h2o(h2o, workdir):
    """h2o on one thread serving workdir/www/x (5 bytes); (process, port)."""
    # h2o started as root serves as nobody: the files must be world-readable.
    os.chmod(workdir, 0o755)
    os.makedirs(os.path.join(workdir, "www"), mode=0o755, exist_ok=True)
    with open(os.path.join(workdir, "www", "x"), "w") as f:
        f.write("hello")
    port = free_port()
    config = os.path.join(workdir, "h2o.conf")
    with open(config, "w") as f:
        f.write(H2O_CONFIG.format(port=port, dir=workdir))
    proc = subprocess.Popen([h2o, "-c", config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"h2o did not listen on port {port} (see {workdir}/error.log)")


def parse_shapes(args):
    if not args.shapes:
        return [(args.connections, args.streams)]
    shapes = []
    for item in args.shapes.split(","):
        connections, streams = item.lower().split("x")
        shapes.append((int(connections), int(streams)))
    return shapes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--uxds", required=True, help="the uxds tool (runs `uxds test-server`)")
    parser.add_argument("--grpc", required=True, help="the gRPC C++ TestService peer server")
    parser.add_argument("--h2o", help="h2o binary: adds h2o serving a 5-byte static file")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warm-up-seconds", type=float, default=1.0)
    parser.add_argument("--shapes", help="CONNECTIONSxSTREAMS, comma-separated (e.g. 1x1,1x10,4x64,100x10)")
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--streams", type=int, default=10)
    parser.add_argument("--response-size", type=int, default=64)
    parser.add_argument("--backends", default="io_uring,epoll",
                        help="uxds runtime backends to run, comma-separated")
    parser.add_argument("--loops", default="1",
                        help="uxds serving loops to run (`test-server --loops`), comma-separated;"
                             " with more than one value each server is named uxds-BACKEND-Nloop")
    parser.add_argument("--configs",
                        help="uxds servers as BACKEND:LOOPS, comma-separated (e.g. io_uring:1,io_uring:2,epoll:1);"
                             " each is named uxds-BACKEND-Nloop; replaces --backends and --loops")
    parser.add_argument("--percentiles", action="store_true", help="p50/p99 latency from h2load's request log")
    parser.add_argument("--latency-rounds", type=int, default=1,
                        help="rounds, after the rate rounds, that log requests for --percentiles")
    args = parser.parse_args()

    shapes = parse_shapes(args)
    loop_counts = [int(n) for n in args.loops.split(",")]
    backends = args.backends.split(",")
    if args.configs:
        configs = [(c.split(":")[0], int(c.split(":")[1])) for c in args.configs.split(",")]
        named = [(f"uxds-{b}-{n}loop", b, n) for b, n in configs]
        loop_counts = sorted({n for _, n in configs})
        backends = list(dict.fromkeys(b for b, _ in configs))
    else:
        named = [(f"uxds-{b}" if len(loop_counts) == 1 else f"uxds-{b}-{n}loop", b, n)
                 for b in backends for n in loop_counts]
    servers = {}
    workdir = tempfile.TemporaryDirectory(prefix="uxds-h2o-")
    try:
        for name, backend, loops in named:
            env = dict(os.environ, UXDS_RUNTIME=backend)
            servers[name] = start([args.uxds, "test-server", "--loops", str(loops)], env=env)
        servers[GRPC_NAME] = start([args.grpc])
        if args.h2o:
            try:
                servers[H2O_NAME] = start_h2o(args.h2o, workdir.name)
            except (RuntimeError, OSError) as e:  # the ceiling is missing, not the figures
                print(f"  error: {e}", file=sys.stderr)
        result = measure(args, shapes, servers)
    finally:
        stop([proc for proc, _ in servers.values()])
        workdir.cleanup()
    report(args, shapes, list(servers), loop_counts, backends, *result)
    return 0 if sum(result[2].values()) == 0 else 1


def measure(args, shapes, servers):
    """Alternating rounds: every shape, every server, then again. Requests/s
    come from the first --rounds; with --percentiles, latency from
    --latency-rounds more, whose requests h2load logs one by one (a write per
    request would slow the load generator the rates are measured with). A run
    that fails counts as an error of its server and leaves no figure."""
    rates = {shape: {name: [] for name in servers} for shape in shapes}
    latencies = {shape: {name: [] for name in servers} for shape in shapes}
    errors = {name: 0 for name in servers}
    problems = []
    latency_rounds = args.latency_rounds if args.percentiles else 0
    for round_index in range(args.rounds + latency_rounds):
        for_latency = round_index >= args.rounds
        for shape in shapes:
            connections, streams = shape
            for name, (_, port) in servers.items():
                load = dict(seconds=args.seconds, warm_up_seconds=args.warm_up_seconds,
                            connections=connections, streams=streams, percentiles=for_latency)
                try:
                    if name == H2O_NAME:
                        r = run_h2load(f"http://127.0.0.1:{port}/x", **load)
                    else:
                        r = run_h2load_grpc(f"127.0.0.1:{port}", response_size=args.response_size, **load)
                except (RuntimeError, ValueError, OSError, subprocess.TimeoutExpired) as e:
                    errors[name] += 1
                    problems.append(f"{name} {connections}x{streams}: {e}")
                    continue
                failed = r["failed"] + r["errored"] + r["timeout"] + r["status_non_2xx"]
                if name != H2O_NAME and r["grpc_status_probe"] != 0:
                    failed += 1
                if r["requests"] == 0:
                    failed += 1
                errors[name] += failed
                if failed:
                    problems.append(f"{name} {connections}x{streams}: {failed} failed requests")
                    continue
                if for_latency:
                    latencies[shape][name].append(r["latency_percentiles_us"])
                else:
                    rates[shape][name].append(r["requests_per_second"])
    for problem in problems:
        print(f"  error: {problem}", file=sys.stderr)
    return rates, latencies, errors


def report(args, shapes, names, loop_counts, backends, rates, latencies, errors):
    out = {"shapes": [], "medians_rps": {}, "latency_us": {}, "ratios": {}, "runs": {}, "errors": errors}
    for shape in shapes:
        key = f"{shape[0]}x{shape[1]}"
        medians = {name: statistics.median(v) if v else None for name, v in rates[shape].items()}
        print(f"h2load, {shape[0]} connection(s) x {shape[1]} streams, {args.response_size} B gRPC"
              f" responses, {args.rounds} rounds of {args.seconds:g} s")
        lat = {}
        for name in names:
            runs = ", ".join(f"{v:,.0f}" for v in rates[shape][name])
            median = "–" if medians[name] is None else f"{medians[name]:,.0f}"
            line = f"  {name:22s} median {median:>10} req/s   runs: {runs}   errors: {errors[name]}"
            if latencies[shape][name]:
                lat[name] = {p: statistics.median(r[p] for r in latencies[shape][name]) for p in ("p50", "p99")}
                line += f"   p50 {lat[name]['p50']:,.0f} us  p99 {lat[name]['p99']:,.0f} us"
            print(line)
        ratios = {}

        def over(a, b):
            return medians[a] / medians[b] if medians[a] is not None and medians[b] else None

        uxds_names = [name for name in names if name.startswith("uxds-")]
        for name in uxds_names:
            ratios[f"{name} / {GRPC_NAME}"] = over(name, GRPC_NAME)
            if H2O_NAME in medians:
                ratios[f"{name} / {H2O_NAME}"] = over(name, H2O_NAME)
        if "uxds-io_uring" in medians and "uxds-epoll" in medians:
            ratios["uxds-epoll / uxds-io_uring"] = over("uxds-epoll", "uxds-io_uring")
        # Scaling with loops: each count against the first one given.
        if len(loop_counts) > 1:
            for backend in backends:
                base = f"uxds-{backend}-{loop_counts[0]}loop"
                for loops in loop_counts[1:]:
                    name = f"uxds-{backend}-{loops}loop"
                    if name in medians and base in medians:
                        ratios[f"{name} / {base}"] = over(name, base)
        for label, ratio in ratios.items():
            print(f"  ratio {label}: " + ("–" if ratio is None else f"{ratio:.2f}"))
        out["shapes"].append(key)
        out["medians_rps"][key] = medians
        out["latency_us"][key] = lat
        out["ratios"][key] = ratios
        out["runs"][key] = rates[shape]
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
