"""./dev bench: every figure beside its baseline, in one run, as JSON, a
Markdown table and PNG charts.

    bench_report.py --build build-bench [--quick] [--out bench/results]

Writes OUT/<date>-<commit>.json (every figure and every raw measurement),
OUT/latest.md (figure, uxds, baseline, ratio, target, met?) and
OUT/*.png (bench_charts.py). Steps run one after another, never beside each
other: the Google Benchmark programs (repetitions randomly interleaved), the
servers under h2load (rounds alternated between servers), the clients
(rounds alternated between uxds and gRPC C++). A step that fails is named in
the report and its figures are marked "not measured"; the exit status is 1
then, or when a figure misses its target with --strict.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import bench_profile  # noqa: E402
import gbench  # noqa: E402
from bench_figures import Figures  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# What each mode runs. Full: about 12 minutes on 2 cores; quick: under 3.
MODES = {
    "full": dict(repetitions=6, min_time=0.2, h2load_rounds=3, h2load_seconds=3.0, h2load_warm_up=1.0,
                 client_rounds=3, client_seconds=3.0),
    "quick": dict(repetitions=3, min_time=0.05, h2load_rounds=1, h2load_seconds=1.0, h2load_warm_up=0.5,
                  client_rounds=1, client_seconds=1.5),
}
SHAPES = "1x1,1x10,4x64,100x10"
CLIENT_CONCURRENCY = "1,16,64"
# Cases run again, each in a process of its own, for a figure the process
# as a whole reports (ru_maxrss: the peak of every case it ran): name in the
# report's raw results -> (program, filter).
ALONE = {
    "cds_10000_alone": ("xds_scale_bench", "^BM_OneCdsResponse/clusters:10000/lookup:0/"),
    "cds_100000_alone": ("xds_scale_bench", "^BM_OneCdsResponse/clusters:100000/lookup:0/"),
}
# Programs that only serve a measurement elsewhere, not benchmarks.
NOT_BENCHMARKS = {"cds_response_server", "accept_spread_server"}


def log(message):
    print(f"== {message}", file=sys.stderr, flush=True)


def machine():
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpus": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "load_average_at_start": os.getloadavg()}


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True).stdout.strip()


def last_json_line(text):
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON line in the output")


def run_step(name, argv, timeout, failed_steps):
    """Runs a compare script; its JSON line, even when it exits 1 because
    some run failed (those runs left no figure, and the failure is kept in
    failed_steps). The script gets its own process group, so that a timeout
    also ends the servers and clients it started."""
    log(f"{name}: {' '.join(argv)}")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        failed_steps[name] = f"timed out after {timeout} s"
        return None
    # Its table and its errors, not its JSON line (that goes into the report).
    sys.stderr.write("".join(line for line in stdout.splitlines(True) if not line.startswith("{")))
    sys.stderr.write(stderr[-4000:])
    try:
        result = last_json_line(stdout)
    except ValueError:
        result = None
    if proc.returncode != 0:
        errors = [line for line in stderr.splitlines() if line.strip()][-5:]
        failed_steps[name] = f"exited {proc.returncode}: " + " | ".join(errors)
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build-bench")
    parser.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and rounds (under 3 minutes)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a figure misses its target")
    parser.add_argument("--only", help="comma-separated steps: gbench,servers,clients (default: all)")
    parser.add_argument("--profile", choices=["yes", "no"],
                        help="perf-profile each missed target (default: yes for a full run, no for --quick)")
    args = parser.parse_args()
    mode = MODES["quick" if args.quick else "full"]
    steps = set((args.only or "gbench,servers,clients").split(","))
    build = os.path.abspath(args.build)
    started = time.monotonic()
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "mode": "quick" if args.quick else "full",
        "machine": machine(),
        "raw": {},
        "failed_steps": {},
    }

    if "gbench" in steps:
        bench_dir = os.path.join(build, "bench")
        for program in sorted(os.listdir(bench_dir)):
            path = os.path.join(bench_dir, program)
            if program in NOT_BENCHMARKS or not os.access(path, os.X_OK) or not os.path.isfile(path):
                continue
            log(f"{program} ({mode['repetitions']} repetitions, interleaved)")
            program_started = time.monotonic()
            try:
                medians = gbench.run(path, mode["repetitions"], mode["min_time"])
                report["raw"][program] = medians.report
                report.setdefault("seconds_per_program", {})[program] = round(time.monotonic() - program_started, 1)
            except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
                report["failed_steps"][program] = str(e)

        for name, (program, pattern) in ALONE.items():
            log(f"{program} {pattern} alone")
            try:
                # Two repetitions: Google Benchmark reports a median only then.
                medians = gbench.run(os.path.join(bench_dir, program), 2, benchmark_filter=pattern)
                report["raw"][name] = medians.report
            except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
                report["failed_steps"][name] = str(e)

    uxds = os.path.join(build, "tools", "uxds", "uxds")
    peers = os.path.join(build, "tests", "peers")
    if "servers" in steps:
        argv = [sys.executable, os.path.join(REPO, "tools", "dev", "h2load_compare.py"), "--uxds", uxds,
                "--grpc", os.path.join(peers, "grpc_cpp_test_server"), "--shapes", SHAPES,
                "--configs", "io_uring:1,io_uring:2,epoll:1", "--percentiles", "--latency-rounds", "1",
                "--rounds", str(mode["h2load_rounds"]), "--seconds", str(mode["h2load_seconds"]),
                "--warm-up-seconds", str(mode["h2load_warm_up"])]
        h2o = shutil.which("h2o")
        if h2o:
            argv += ["--h2o", h2o]
        else:
            report["failed_steps"]["h2o"] = "h2o not installed (Debian package h2o): no HTTP/2 ceiling"
        servers = run_step("servers", argv, 1800, report["failed_steps"])
        if servers is not None:
            report["raw"]["servers"] = servers

    if "clients" in steps:
        argv = [sys.executable, os.path.join(REPO, "tools", "dev", "client_compare.py"), "--uxds", uxds,
                "--grpc-client", os.path.join(peers, "grpc_cpp_xds_client"),
                "--concurrency", CLIENT_CONCURRENCY, "--rounds", str(mode["client_rounds"]),
                "--seconds", str(mode["client_seconds"])]
        clients = run_step("clients", argv, 1800, report["failed_steps"])
        if clients is not None:
            report["raw"]["clients"] = clients

    report["machine"]["load_average_at_end"] = os.getloadavg()
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    figures = Figures(report["raw"], report["failed_steps"])
    report["figures"] = figures.build()
    if (args.profile or ("no" if args.quick else "yes")) == "yes":
        profile_missed(report, build, uxds)
    write(args.out, report, figures)
    missed = [f["figure"] for f in report["figures"] if f["met"] is False]
    unmeasured = [f["figure"] for f in report["figures"]
                  if f["uxds"] is None or (f["baseline_name"] and f["baseline"] is None)]
    for name in missed:
        log(f"missed target: {name}")
    for name, error in report["failed_steps"].items():
        log(f"step failed: {name}: {error.splitlines()[0] if error else ''}")
    if report["failed_steps"] or unmeasured:
        return 1
    return 1 if args.strict and missed else 0


def profile_missed(report, build, uxds):
    """A profile for each missed target that names its source."""
    if not bench_profile.available():
        report["failed_steps"]["profiles"] = "perf not installed (Debian package linux-perf)"
        return
    for row in report["figures"]:
        source = row.get("profile_source")
        if row["met"] is not False or not source:
            continue
        log(f"profiling: {row['figure']}")
        try:
            if source["kind"] == "gbench":
                program = source["program"]
                run_name = gbench.Medians(program, report["raw"][program]).get(source["name"])["run_name"]
                row["profile"] = bench_profile.profile_benchmark(os.path.join(build, "bench", program), run_name)
            elif source["kind"] == "client":
                row["profile"] = bench_profile.profile_client(
                    uxds, os.path.join(build, "tests", "peers", "grpc_cpp_xds_client"), source["concurrency"])
            else:
                row["profile"] = bench_profile.profile_server(uxds, source["backend"], source["loops"],
                                                              source["connections"], source["streams"])
        except Exception as e:  # a profile is extra: its failure must not lose the report
            row["profile_error"] = f"{type(e).__name__}: {e}"


def write(out, report, figures):
    """The JSON and the table first, then the charts (and the table again
    with them): a chart that fails loses nothing measured."""
    os.makedirs(out, exist_ok=True)
    json_path = os.path.join(out, f"{report['date'][:10]}-{report['commit']}.json")
    table_path = os.path.join(out, "latest.md")

    def save(charts):
        report["charts"] = [name for name, _ in charts]
        with open(json_path, "w") as f:
            json.dump(report, f, indent=1)
        with open(table_path, "w") as f:
            f.write(figures.markdown(report, os.path.basename(json_path), charts))

    save([])
    try:
        import bench_charts

        charts = bench_charts.write_all(out, report)
    except ImportError as e:
        report["failed_steps"]["charts"] = f"{e} (Debian package python3-matplotlib)"
        charts = []
    save(charts)
    log(f"wrote {json_path}, {table_path} and {len(charts)} charts ({report['elapsed_s']:.0f} s)")


if __name__ == "__main__":
    sys.exit(main())
