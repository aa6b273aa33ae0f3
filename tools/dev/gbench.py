"""Runs a Google Benchmark program and reads back its medians.

A program runs once with repetitions and random interleaving, so the
repetitions of the things one program compares (a pick beside a binary
search, uxds beside a floor) alternate rather than run back to back, and
drift in the machine's load touches them alike.
"""
import json
import re
import subprocess

_TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


# Parts of a run name that say how it was timed, not what it measures.
_TIMING_PARTS = re.compile(r"/(iterations:\d+|real_time|manual_time)(?=/|$)")


def canonical(run_name):
    """A run name without its timing parts: "BM_OneCdsResponse/clusters:10000/lookup:0",
    "BM_PickThroughSlot/threads:2"."""
    return _TIMING_PARTS.sub("", run_name)


class Medians:
    """The median aggregate of every benchmark one program ran, by canonical
    run name (e.g. "BM_HashAndPick/4096", "BM_PickThroughSlot/threads:2")."""

    def __init__(self, program, report):
        self.program = program
        self.report = report
        self.by_name = {}
        for b in report.get("benchmarks", []):
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median":
                self.by_name[canonical(b["run_name"])] = b

    def has(self, name):
        return canonical(name) in self.by_name

    def get(self, name):
        name = canonical(name)
        if name not in self.by_name:
            raise KeyError(f"{self.program}: no median for {name!r} (have: {', '.join(sorted(self.by_name))})")
        return self.by_name[name]

    def real_ns(self, name):
        b = self.get(name)
        return b["real_time"] * _TO_NS[b["time_unit"]]

    def cpu_ns(self, name):
        b = self.get(name)
        return b["cpu_time"] * _TO_NS[b["time_unit"]]

    def counter(self, name, counter):
        b = self.get(name)
        if counter not in b:
            raise KeyError(f"{self.program}: {name!r} has no counter {counter!r}")
        return b[counter]


def run(path, repetitions, min_time=None, benchmark_filter=None, timeout=1200):
    """Medians of every benchmark in the program at path."""
    argv = [
        path,
        "--benchmark_format=json",
        f"--benchmark_repetitions={repetitions}",
        "--benchmark_enable_random_interleaving=true",
        "--benchmark_report_aggregates_only=true",
    ]
    if min_time is not None:
        argv.append(f"--benchmark_min_time={min_time}")
    if benchmark_filter:
        argv.append(f"--benchmark_filter={benchmark_filter}")
    completed = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if completed.returncode != 0:
        raise RuntimeError(f"{path} exited {completed.returncode}: {completed.stderr.strip()[-2000:]}")
    return Medians(path.rsplit("/", 1)[-1], json.loads(completed.stdout))
