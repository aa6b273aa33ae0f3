"""The same h2load gRPC load against the TestService on N loops, its
connections spread by SO_REUSEPORT (a listening socket per loop, what
uxds::Server does) and by one acceptor handing them out in turn
(bench/accept_spread_server), once per runtime backend, alternating rounds
in one run; prints the median requests/s of each and their ratio.

    accept_spread_compare.py --server build/bench/accept_spread_server \
        --loops 2 --connections 4 --streams 64
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "peers"))
from h2load_compare import start  # noqa: E402
from h2load_grpc import run_h2load_grpc  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True, help="bench/accept_spread_server")
    parser.add_argument("--loops", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--backends", default="io_uring,epoll")
    args = parser.parse_args()

    servers = {}
    for backend in args.backends.split(","):
        env = dict(os.environ, UXDS_RUNTIME=backend)
        for mode in ("reuseport", "acceptor"):
            servers[f"{backend}-{mode}"] = start(
                [args.server, "--loops", str(args.loops), "--mode", mode], env=env)
    rates = {name: [] for name in servers}
    errors = {name: 0 for name in servers}
    try:
        for _ in range(args.rounds):
            for name, (_, port) in servers.items():
                r = run_h2load_grpc(f"127.0.0.1:{port}", seconds=args.seconds,
                                    connections=args.connections, streams=args.streams)
                rates[name].append(r["requests_per_second"])
                errors[name] += r["failed"] + r["errored"] + r["timeout"] + r["status_non_2xx"]
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=10)

    medians = {name: statistics.median(v) for name, v in rates.items()}
    print(f"h2load UnaryCall, {args.connections} connection(s) x {args.streams} streams, "
          f"{args.loops} loops, {args.rounds} rounds of {args.seconds:g} s")
    for name in servers:
        runs = ", ".join(f"{v:,.0f}" for v in rates[name])
        print(f"  {name:20s} median {medians[name]:>10,.0f} req/s   runs: {runs}   "
              f"errors: {errors[name]}")
    ratios = {}
    for backend in args.backends.split(","):
        ratios[f"{backend} acceptor / reuseport"] = (
            medians[f"{backend}-acceptor"] / medians[f"{backend}-reuseport"])
    for label, ratio in ratios.items():
        print(f"  ratio {label}: {ratio:.2f}")
    print(json.dumps({"medians_rps": medians, "ratios": ratios, "runs": rates, "errors": errors}))
    return 0 if sum(errors.values()) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
