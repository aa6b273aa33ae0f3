"""The same h2load gRPC load against the uxds server (once per runtime
backend) and the gRPC C++ 1.51 server, alternating rounds in one run; prints
medians and the ratios.

    h2load_compare.py --uxds build/tools/uxds/uxds \
        --grpc build/tests/peers/grpc_cpp_test_server [--rounds 3] [--seconds 5] \
        [--backends io_uring,epoll] [--loops 1,2]

Each server runs as its own process on 127.0.0.1 and answers
grpc.testing.TestService/UnaryCall; a uxds server's backend is forced with
UXDS_RUNTIME. Rounds alternate (uxds io_uring, uxds epoll, gRPC, ...) so that
drift in the machine's load affects all alike.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "peers"))
from h2load_grpc import run_h2load_grpc  # noqa: E402


def start(argv, env=None):
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    for line in proc.stdout:
        if line.startswith("PORT "):
            return proc, int(line.split()[1])
    raise RuntimeError(f"{argv[0]} did not print its port")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--uxds", required=True, help="the uxds tool (runs `uxds test-server`)")
    parser.add_argument("--grpc", required=True, help="the gRPC C++ TestService peer server")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--streams", type=int, default=10)
    parser.add_argument("--response-size", type=int, default=64)
    parser.add_argument("--backends", default="io_uring,epoll",
                        help="uxds runtime backends to run, comma-separated")
    parser.add_argument("--loops", default="1",
                        help="uxds serving loops to run (`test-server --loops`), comma-separated;"
                             " with more than one value each server is named uxds-BACKEND-Nloop")
    args = parser.parse_args()

    loop_counts = [int(n) for n in args.loops.split(",")]
    servers = {}
    for backend in args.backends.split(","):
        env = dict(os.environ, UXDS_RUNTIME=backend)
        for loops in loop_counts:
            name = f"uxds-{backend}" if len(loop_counts) == 1 else f"uxds-{backend}-{loops}loop"
            servers[name] = start([args.uxds, "test-server", "--loops", str(loops)], env=env)
    servers["grpc-c++-1.51"] = start([args.grpc])
    rates = {name: [] for name in servers}
    errors = {name: 0 for name in servers}
    try:
        for _ in range(args.rounds):
            for name, (_, port) in servers.items():
                r = run_h2load_grpc(
                    f"127.0.0.1:{port}",
                    seconds=args.seconds,
                    connections=args.connections,
                    streams=args.streams,
                    response_size=args.response_size,
                )
                rates[name].append(r["requests_per_second"])
                errors[name] += r["failed"] + r["errored"] + r["timeout"] + r["status_non_2xx"]
                if r["grpc_status_probe"] != 0:
                    errors[name] += 1
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=10)

    medians = {name: statistics.median(v) for name, v in rates.items()}
    print(f"h2load UnaryCall, {args.connections} connection(s) x {args.streams} streams, "
          f"{args.response_size} B responses, {args.rounds} rounds of {args.seconds:g} s")
    for name in servers:
        runs = ", ".join(f"{v:,.0f}" for v in rates[name])
        print(f"  {name:22s} median {medians[name]:>10,.0f} req/s   runs: {runs}   errors: {errors[name]}")
    ratios = {}
    uxds_names = [name for name in servers if name.startswith("uxds-")]
    for name in uxds_names:
        ratios[f"{name} / grpc-c++-1.51"] = medians[name] / medians["grpc-c++-1.51"]
    if "uxds-io_uring" in medians and "uxds-epoll" in medians:
        ratios["uxds-epoll / uxds-io_uring"] = medians["uxds-epoll"] / medians["uxds-io_uring"]
    # Scaling with loops: each count against the first one given.
    if len(loop_counts) > 1:
        for backend in args.backends.split(","):
            base = f"uxds-{backend}-{loop_counts[0]}loop"
            for loops in loop_counts[1:]:
                name = f"uxds-{backend}-{loops}loop"
                ratios[f"{name} / {base}"] = medians[name] / medians[base]
    for label, ratio in ratios.items():
        print(f"  ratio {label}: {ratio:.2f}")
    print(json.dumps({"medians_rps": medians, "ratios": ratios, "runs": rates, "errors": errors}))
    return 0 if sum(errors.values()) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
