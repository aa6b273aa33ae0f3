"""Where the time goes in a figure that missed its target: a `perf record`
of the benchmark (or of the uxds server under the same h2load shape), the
hottest symbols by self time.

perf samples on the cpu-clock when the machine has no hardware counters
(most VMs), which is enough to rank symbols.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "peers"))
from h2load_grpc import run_h2load_grpc  # noqa: E402

TOP = 8


def available():
    return shutil.which("perf") is not None


def hottest(data_path):
    """[(percent, symbol, object)] of the TOP symbols by self time."""
    completed = subprocess.run(
        ["perf", "report", "-i", data_path, "--no-children", "--stdio", "--sort", "dso,symbol",
         "-g", "none", "--percent-limit", "1", "--field-separator", ";"],
        capture_output=True, text=True, timeout=120)
    rows = []
    for line in completed.stdout.splitlines():
        # " 20.57% ;libc.so.6 ;[.] __memcmp_evex_movbe ;-  -"
        fields = [f.strip() for f in line.split(";")]
        if len(fields) < 3 or not fields[0].endswith("%"):
            continue
        symbol = fields[2].split("] ", 1)[-1]
        if len(symbol) > 100:  # template instantiations: the start says enough
            symbol = symbol[:97] + "..."
        rows.append((float(fields[0].rstrip("%")), symbol, fields[1]))
        if len(rows) == TOP:
            break
    if not rows:
        raise RuntimeError(f"perf report gave no symbols: {completed.stderr.strip()[-300:]}")
    return rows


def profile_benchmark(program_path, run_name):
    """One benchmark alone (its exact run name), long enough for a few
    thousand samples."""
    with tempfile.TemporaryDirectory(prefix="uxds-perf-") as tmp:
        data = os.path.join(tmp, "perf.data")
        completed = subprocess.run(
            ["perf", "record", "-q", "-F", "999", "-o", data, "--", program_path,
             f"--benchmark_filter=^{re.escape(run_name)}$", "--benchmark_min_time=2"],
            capture_output=True, text=True, timeout=600)
        if completed.returncode != 0 or not os.path.exists(data):
            raise RuntimeError(f"perf record failed: {completed.stderr.strip()[-300:]}")
        return hottest(data)


def profile_server(uxds, backend, loops, connections, streams, seconds=4.0):
    """`uxds test-server` while h2load drives the shape at it."""
    env = dict(os.environ, UXDS_RUNTIME=backend)
    proc = subprocess.Popen([uxds, "test-server", "--loops", str(loops)], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        port = None
        for line in proc.stdout:
            if line.startswith("PORT "):
                port = int(line.split()[1])
                break
        if port is None:
            raise RuntimeError("uxds test-server did not print its port")
        with tempfile.TemporaryDirectory(prefix="uxds-perf-") as tmp:
            data = os.path.join(tmp, "perf.data")
            perf = subprocess.Popen(["perf", "record", "-q", "-F", "999", "-p", str(proc.pid), "-o", data],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                run_h2load_grpc(f"127.0.0.1:{port}", seconds=seconds, warm_up_seconds=1.0,
                                connections=connections, streams=streams, response_size=64)
            finally:
                perf.send_signal(signal.SIGINT)  # perf writes its data and exits
                perf.wait(timeout=60)
            return hottest(data)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def profile_client(uxds, grpc_client, concurrency, calls=100_000):
    """`uxds call` through xds:///bench at that concurrency, as
    client_compare.py runs it (same backend and control plane)."""
    compare = os.path.join(os.path.dirname(__file__), "client_compare.py")
    with tempfile.TemporaryDirectory(prefix="uxds-perf-") as tmp:
        data = os.path.join(tmp, "perf.data")
        completed = subprocess.run(
            [sys.executable, compare, "--uxds", uxds, "--grpc-client", grpc_client, "--concurrency",
             str(concurrency), "--calls", str(calls), "--perf-record", data],
            capture_output=True, text=True, timeout=900, start_new_session=True)
        if completed.returncode != 0 or not os.path.exists(data):
            raise RuntimeError(f"perf record of uxds call failed: {completed.stderr.strip()[-300:]}")
        return hottest(data)
