"""The figures of ./dev bench: each a uxds measurement beside the baseline it
replaces, measured in the same run, with the target the issue that asked
for it set. Read from the raw results bench_report.py gathers.

A figure's ratio is always uxds / baseline, in the figure's unit: below 1 is
better for a time, above 1 for a rate. Targets name the issue they come from.
"""
import gbench

RING_SIZES = [1024, 4096, 65536, 1 << 20, 8388608]
GRPC = "grpc-c++-1.51"
H2O = "h2o-static"


def target(on, op, limit, source):
    """A target on the uxds figure or on the ratio: on in {"uxds", "ratio"}."""
    return {"on": on, "op": op, "limit": limit, "source": source}


def target_text(t, unit):
    if t is None:
        return ""
    op = {"<=": "≤", ">=": "≥"}[t["op"]]
    what = f"{op} {fmt(t['limit'])} {unit}" if t["on"] == "uxds" else f"ratio {op} {fmt(t['limit'])}"
    return f"{what} ({t['source']})"


def gbench_source(program, name):
    return {"kind": "gbench", "program": program, "name": name}


def server_source(backend, loops, shape):
    connections, streams = (int(n) for n in shape.split("x"))
    return {"kind": "server", "backend": backend, "loops": loops, "connections": connections, "streams": streams}


def client_source(concurrency):
    return {"kind": "client", "concurrency": concurrency}


def fmt(value):
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    if float(value).is_integer() and abs(value) < 1e6:
        return f"{int(value):,}"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


class Figures:
    def __init__(self, raw, failed_steps):
        self.raw = raw
        self.failed = failed_steps
        self.rows = []

    # Sources ---------------------------------------------------------------

    def gb(self, program):
        if program not in self.raw:
            raise KeyError(f"{program} did not run" + (f": {self.failed[program]}" if program in self.failed else ""))
        return gbench.Medians(program, self.raw[program])

    def servers(self):
        if "servers" not in self.raw:
            raise KeyError("the h2load step did not run")
        return self.raw["servers"]

    def clients(self):
        if "clients" not in self.raw:
            raise KeyError("the client step did not run")
        return self.raw["clients"]

    # Rows --------------------------------------------------------------------

    def add(self, group, figure, unit, uxds, baseline_name="", baseline=None, goal=None, note="", profile=None):
        """uxds and baseline are callables so that one missing measurement marks
        only its own row "not measured". profile says what to profile when the
        target is missed: gbench_source() or server_source()."""
        row = {"group": group, "figure": figure, "unit": unit, "uxds": None, "baseline_name": baseline_name,
               "baseline": None, "ratio": None, "target": goal, "met": None, "note": note,
               "profile_source": profile}
        def reason(e):
            return e.args[0] if e.args else type(e).__name__

        try:
            row["uxds"] = uxds()
        except (KeyError, TypeError, ZeroDivisionError) as e:
            row["note"] = f"not measured: {reason(e)}"
        if baseline is not None:
            try:
                row["baseline"] = baseline()
            except (KeyError, TypeError, ZeroDivisionError) as e:
                row["note"] = (row["note"] + "; " if row["note"] else "") + f"baseline not measured: {reason(e)}"
        if row["uxds"] is None and not row["note"]:
            row["note"] = "not measured: every run of it failed"
        if row["uxds"] is not None and row["baseline"]:
            row["ratio"] = row["uxds"] / row["baseline"]
        if goal is not None:
            value = row["uxds"] if goal["on"] == "uxds" else row["ratio"]
            if value is not None:
                row["met"] = value <= goal["limit"] if goal["op"] == "<=" else value >= goal["limit"]
        self.rows.append(row)

    def build(self):
        self.ring_picks()
        self.call_picks()
        self.picker_threads()
        self.server_load()
        self.client_calls()
        self.round_trip()
        self.xds_scale()
        self.filter_chains()
        self.start_and_memory()
        self.handshakes()
        self.rbac()
        return self.rows

    def ring_picks(self):
        g = "a. hash + pick against ring size"
        for size in RING_SIZES:
            goal = {4096: target("uxds", "<=", 10, "#7"), 8388608: target("uxds", "<=", 30, "#7")}.get(size)
            self.add(g, f"hash + ring pick, ring {size:,}", "ns",
                     lambda s=size: self.gb("ring_pick_bench").real_ns(f"BM_HashAndPick/{s}"),
                     "binary search over the same ring",
                     lambda s=size: self.gb("ring_pick_bench").real_ns(f"BM_HashAndBinarySearch/{s}"), goal,
                     note=self.floor_note(size), profile=gbench_source("ring_pick_bench", f"BM_HashAndPick/{size}"))
        self.add(g, "ring build, 1000 weighted endpoints into 4096", "µs",
                 lambda: self.gb("ring_pick_bench").real_ns("BM_RingBuild") / 1e3,
                 goal=target("uxds", "<=", 100, "#7"), profile=gbench_source("ring_pick_bench", "BM_RingBuild"))

    def floor_note(self, size):
        try:
            floor = self.gb("ring_pick_bench").real_ns(f"BM_HashAndRandomRead/{size}")
            return f"floor (hash + one random read): {fmt(floor)} ns"
        except KeyError:
            return ""

    def call_picks(self):
        g = "b. route + hash + pick as a call sees it"
        bench = "call_pick_bench"
        self.add(g, "route + hash + pick per call (ring 4096, 4 routes)", "ns",
                 lambda: self.gb(bench).real_ns("BM_CallRouteHashPick"),
                 "the call path before routes were compiled",
                 lambda: self.gb(bench).real_ns("BM_CallRouteHashPickAsBefore"),
                 target("uxds", "<=", 60, "#25"), profile=gbench_source(bench, "BM_CallRouteHashPick"))
        self.add(g, "allocations per call on that path", "allocs",
                 lambda: self.gb(bench).counter("BM_CallRouteHashPick", "allocs_per_call"),
                 "before",
                 lambda: self.gb(bench).counter("BM_CallRouteHashPickAsBefore", "allocs_per_call"),
                 target("uxds", "<=", 0, "#25"))

    def picker_threads(self):
        g = "c. picks/s from 1 and 2 threads while pickers are published"
        bench = "ring_pick_bench"

        def rate(name):
            return self.gb(bench).counter(name, "items_per_second") / 1e6

        self.add(g, "picks/s through a PickerSlot, 1 thread", "M/s",
                 lambda: rate("BM_PickThroughSlot/threads:1"),
                 "a private picker, 1 thread", lambda: rate("BM_PickPrivatePicker/threads:1"))
        self.add(g, "picks/s through a PickerSlot, 2 threads", "M/s",
                 lambda: rate("BM_PickThroughSlot/threads:2"),
                 "the same slot, 1 thread", lambda: rate("BM_PickThroughSlot/threads:1"),
                 target("ratio", ">=", 1.8, "#7"), profile=gbench_source(bench, "BM_PickThroughSlot/threads:2"),
                 note="ceiling: two private pickers reach "
                      + self.safe(lambda: fmt(rate("BM_PickPrivatePicker/threads:2")) + " M/s"))

    def safe(self, fn):
        try:
            return fn()
        except (KeyError, TypeError):
            return "–"

    def server_load(self):
        g = "d. server unary requests/s and latency under h2load (connections × streams)"

        def rps(shape, server):
            return self.servers()["medians_rps"][shape][server]

        def latency(shape, server, p):
            return self.servers()["latency_us"][shape][server][p]

        for shape in ("1x1", "1x10", "4x64", "100x10"):
            label = shape.replace("x", "×")
            wide = shape in ("4x64", "100x10")
            self.add(g, f"{label}: uxds io_uring, 1 loop", "req/s",
                     lambda s=shape: rps(s, "uxds-io_uring-1loop"), "gRPC C++ 1.51 server",
                     lambda s=shape: rps(s, GRPC))
            self.add(g, f"{label}: uxds io_uring, 2 loops", "req/s",
                     lambda s=shape: rps(s, "uxds-io_uring-2loop"), "gRPC C++ 1.51 server",
                     lambda s=shape: rps(s, GRPC), target("ratio", ">=", 3.5, "#25") if wide else None,
                     profile=server_source("io_uring", 2, shape))
            self.add(g, f"{label}: uxds epoll, 1 loop", "req/s",
                     lambda s=shape: rps(s, "uxds-epoll-1loop"), "uxds io_uring, 1 loop",
                     lambda s=shape: rps(s, "uxds-io_uring-1loop"), target("ratio", ">=", 0.85, "#13"),
                     profile=server_source("epoll", 1, shape))
            self.add(g, f"{label}: uxds io_uring, 1 loop, against the HTTP/2 ceiling", "req/s",
                     lambda s=shape: rps(s, "uxds-io_uring-1loop"), "h2o, 1 thread, 5-byte static file",
                     lambda s=shape: rps(s, H2O), target("ratio", ">=", 0.6, "#25"),
                     profile=server_source("io_uring", 1, shape))
            for p in ("p50", "p99"):
                self.add(g, f"{label}: {p} latency, uxds io_uring, 1 loop", "µs",
                         lambda s=shape, q=p: latency(s, "uxds-io_uring-1loop", q), "gRPC C++ 1.51 server",
                         lambda s=shape, q=p: latency(s, GRPC, q))

    def client_calls(self):
        g = "e. client unary calls through xds:/// (calls in flight)"

        def figure(kind, name, conc):
            return self.clients()[kind][name][str(conc)]

        for conc in (1, 16, 64):
            self.add(g, f"calls/s, {conc} in flight (uxds: 2 loops)", "calls/s",
                     lambda c=conc: figure("calls_per_s", "uxds", c), "gRPC C++ 1.51 xDS client",
                     lambda c=conc: figure("calls_per_s", GRPC, c),
                     target("ratio", ">=", 4, "#25: uxds call --loops 2") if conc == 64 else None,
                     profile=client_source(conc))
            self.add(g, f"CPU per call, {conc} in flight", "µs",
                     lambda c=conc: figure("cpu_us_per_call", "uxds", c), "gRPC C++ 1.51 xDS client",
                     lambda c=conc: figure("cpu_us_per_call", GRPC, c),
                     target("ratio", "<=", 1 / 6, "#25") if conc == 64 else None, profile=client_source(conc))
            for p in ("p50", "p99"):
                self.add(g, f"{p} call latency, {conc} in flight", "µs",
                         lambda c=conc, q=p: figure(f"{q}_us", "uxds", c), "gRPC C++ 1.51 xDS client",
                         lambda c=conc, q=p: figure(f"{q}_us", GRPC, c))

    def round_trip(self):
        g = "f. unary round trip, one call in flight, against raw TCP"
        bench = "unary_roundtrip_bench"
        for size, backend, label in ((0, 0, "0 B, io_uring"), (1024, 0, "1 KiB, io_uring"),
                                     (0, 1, "0 B, epoll"), (1024, 1, "1 KiB, epoll")):
            self.add(g, f"unary round trip, {label}", "µs",
                     lambda s=size, b=backend: self.gb(bench).real_ns(f"BM_UnaryRoundTrip/{s}/{b}") / 1e3,
                     "TCP ping-pong of the same size (the floor)",
                     lambda s=size: self.gb(bench).real_ns(f"BM_TcpPingPong/{s}") / 1e3)

    def xds_scale(self):
        g = "g. many resources: decode, watcher, picker, memory"
        bench = "xds_scale_bench"
        for n in (10000, 100000):
            name = f"BM_OneCdsResponse/clusters:{n}/lookup:0"
            self.add(g, f"CDS {n:,} Clusters: decode + validate, per Cluster", "µs",
                     lambda c=n: self.gb(bench).counter(f"BM_DecodeClusters/clusters:{c}", "us_per_cluster"))
            self.add(g, f"CDS {n:,} Clusters: server write to each watcher, per Cluster", "µs",
                     lambda nm=name: self.gb(bench).counter(nm, "us_per_cluster"),
                     goal=target("uxds", "<=", 5, "#10"), profile=gbench_source(bench, name))
            self.add(g, f"CDS {n:,} Clusters: longest control-loop stall", "ms",
                     lambda nm=name: self.gb(bench).counter(nm, "worst_stall_ms"))
        # ru_maxrss is a process's peak over every case it ran: each case runs
        # again alone for it (bench_report.ALONE).
        for n in (10000, 100000):
            self.add(g, f"CDS {n:,} Clusters: peak RSS of a process running that case alone", "MB",
                     lambda c=n: self.gb(f"cds_{c}_alone").counter(
                         f"BM_OneCdsResponse/clusters:{c}/lookup:0", "peak_rss_MB"))
        eds = "BM_OneEdsResponse/endpoints:10000"
        self.add(g, "EDS 10,000 endpoints: decode + validate", "ms",
                 lambda: self.gb(bench).real_ns("BM_DecodeEndpoints/endpoints:10000") / 1e6)
        self.add(g, "EDS 10,000 endpoints: server write to the watcher", "ms",
                 lambda: self.gb(bench).counter(eds, "ms_to_watcher"))
        self.add(g, "EDS 10,000 endpoints: server write to the new ring_hash picker", "ms",
                 lambda: self.gb(bench).counter(eds, "ms_to_picker"), profile=gbench_source(bench, eds))
        self.add(g, "EDS 10,000 endpoints: peak RSS growth", "MB",
                 lambda: self.gb("xds_memory_bench").counter("BM_EdsResponseMemory/endpoints:10000",
                                                             "peak_growth_MB"))

    def filter_chains(self):
        g = "h. FilterChainMatch per connection; Listener validation"
        bench = "filter_chain_match_bench"
        for chains in (1, 10, 100, 1000):
            self.add(g, f"filter chain match, {chains} chains", "ns",
                     lambda c=chains: self.gb(bench).real_ns(f"BM_SelectFilterChain/chains:{c}"),
                     goal=target("uxds", "<=", 200, "#8") if chains == 100 else None,
                     profile=gbench_source(bench, f"BM_SelectFilterChain/chains:{chains}"))
        self.add(g, "decode + validate a 1000-chain Listener", "ms",
                 lambda: self.gb(bench).real_ns("BM_DecodeListener/chains:1000") / 1e6)
        self.add(g, "build the matcher for it", "ms",
                 lambda: self.gb(bench).real_ns("BM_BuildMatcher/chains:1000") / 1e6)

    def handshakes(self):
        g = "j. a new connection and its first call: TLS against plaintext (A29)"
        bench = "handshake_bench"
        name = "BM_ConnectCallClose/{}"
        plain = lambda: self.gb(bench).real_ns(name.format(0)) / 1e3
        self.add(g, "connect + TLS handshake + call + close", "µs",
                 lambda: self.gb(bench).real_ns(name.format(1)) / 1e3, "the same in plaintext", plain)
        self.add(g, "connect + mutual TLS handshake + call + close", "µs",
                 lambda: self.gb(bench).real_ns(name.format(2)) / 1e3, "the same in plaintext", plain)
        # The certificate providers and the SAN check must cost nothing a
        # handshake would notice: the context is built once per certificate
        # version, so what is left per connection is a look-up and the check.
        self.add(g, "the same, mutual TLS from xDS certificate providers", "µs",
                 lambda: self.gb(bench).real_ns(name.format(3)) / 1e3,
                 "mutual TLS from a fixed context",
                 lambda: self.gb(bench).real_ns(name.format(2)) / 1e3,
                 goal=target("ratio", "<=", 1.1, "#28"), profile=gbench_source(bench, name.format(3)))

    def rbac(self):
        g = "k. RBAC per call on an xDS-enabled server (A41)"
        bench = "rbac_bench"
        check = "BM_RbacCheck/{}"
        # A call over loopback costs tens of µs; a check of a 10-rule policy
        # must stay a rounding error of it, and allocate nothing.
        self.add(g, "RBAC check, a 10-rule policy (every rule tried)", "ns",
                 lambda: self.gb(bench).real_ns(check.format(0)), goal=target("uxds", "<=", 100, "#28"),
                 profile=gbench_source(bench, check.format(0)))
        self.add(g, "RBAC check, 10 policies of 3 rules (all tried)", "ns",
                 lambda: self.gb(bench).real_ns(check.format(1)), profile=gbench_source(bench, check.format(1)))
        self.add(g, "allocations per RBAC check", "count",
                 lambda: max(self.gb(bench).counter(check.format(v), "allocs_per_check") for v in (0, 1)),
                 goal=target("uxds", "<=", 0, "#28"))
        call = "BM_UnaryCall/{}"
        self.add(g, "unary call over mutual TLS, xDS routing + 10-policy RBAC", "µs",
                 lambda: self.gb(bench).real_ns(call.format(2)) / 1e3,
                 "the same, xDS routing without RBAC",
                 lambda: self.gb(bench).real_ns(call.format(1)) / 1e3)
        self.add(g, "unary call over mutual TLS, xDS routing without RBAC", "µs",
                 lambda: self.gb(bench).real_ns(call.format(1)) / 1e3,
                 "the same, the application's registry alone",
                 lambda: self.gb(bench).real_ns(call.format(0)) / 1e3)

    def start_and_memory(self):
        g = "i. process start to the first successful call through uxds control-plane"
        self.add(g, "start to first call (spawn to exit, one call)", "ms",
                 lambda: self.clients()["start_to_first_call_ms"]["uxds"], "gRPC C++ 1.51 xDS client",
                 lambda: self.clients()["start_to_first_call_ms"][GRPC])
        g = "j. resident memory of a client holding 1000 Clusters of 10 endpoints"
        bench = "xds_memory_bench"
        self.add(g, "RSS growth: the XdsClient's resources", "MB",
                 lambda: self.gb(bench).counter("BM_XdsClientMemory/clusters:1000/balancers:0", "rss_growth_MB"))
        self.add(g, "RSS growth: with the load balancers a channel keeps per Cluster", "MB",
                 lambda: self.gb(bench).counter("BM_XdsClientMemory/clusters:1000/balancers:1", "rss_growth_MB"),
                 note="process total "
                      + self.safe(lambda: fmt(self.gb(bench).counter(
                          "BM_XdsClientMemory/clusters:1000/balancers:1", "vm_rss_MB")) + " MB"))

    # Output ------------------------------------------------------------------

    def markdown(self, report, json_name, charts):
        m = report["machine"]
        lines = [
            f"# uxds benchmarks: {report['mode']} run at {report['commit']}"
            + (" (uncommitted changes)" if report["dirty"] else ""),
            "",
            f"{report['date']}, {m['cpus']} × {m['cpu_model']}, Linux {m['kernel']}, load average "
            f"{m['load_average_at_start'][0]:.2f} at the start and {m['load_average_at_end'][0]:.2f} at the end; "
            f"{report['elapsed_s']:.0f} s. Every figure is a median of repetitions or rounds alternated "
            f"with its baseline in this run. Ratio = uxds / baseline (below 1 is better for a time, above 1 "
            f"for a rate). Raw results: `{json_name}`. Command: `./dev bench"
            + (" --quick" if report["mode"] == "quick" else "") + "`.",
            "",
        ]
        if report["failed_steps"]:
            lines.append("**Steps that failed:** " + "; ".join(
                f"{k}: {v.splitlines()[0] if v else ''}" for k, v in report["failed_steps"].items()))
            lines.append("")
        missed = [r for r in self.rows if r["met"] is False]
        lines.append(f"**Targets missed: {len(missed)}**" + (
            " (" + "; ".join(r["figure"] for r in missed) + ")" if missed else "") + ".")
        lines.append("")
        group = None
        for r in self.rows:
            if r["group"] != group:
                group = r["group"]
                lines += ["", f"## {group}", "",
                          "| figure | uxds | baseline | ratio | target | met? |", "|---|---|---|---|---|---|"]
            base = f"{fmt(r['baseline'])} ({r['baseline_name']})" if r["baseline_name"] else "–"
            met = {True: "yes", False: "**missed**", None: "–"}[r["met"]]
            uxds = f"{fmt(r['uxds'])} {r['unit']}" if r["uxds"] is not None else "not measured"
            figure = r["figure"] + (f" — {r['note']}" if r["note"] else "")
            ratio = fmt(r["ratio"]) if r["ratio"] is not None else "–"
            lines.append(f"| {figure} | {uxds} | {base} | {ratio} | {target_text(r['target'], r['unit'])} | {met} |")
        profiled = [r for r in missed if r.get("profile") or r.get("profile_error")]
        if profiled:
            lines += ["", "## Where the time goes in the missed targets", "",
                      "`perf record` of the benchmark alone, of the uxds server under that h2load shape, or of "
                      "`uxds call` at that concurrency; "
                      "self time of the hottest symbols.", ""]
            for r in profiled:
                lines.append(f"- **{r['figure']}**: " + (
                    "; ".join(f"{pct:.1f} % `{sym}` ({obj})" for pct, sym, obj in r["profile"])
                    if r.get("profile") else f"no profile: {r['profile_error']}"))
        if charts:
            lines += ["", "## Charts", ""]
            lines += [f"![{title}]({name})" for name, title in charts]
        return "\n".join(lines) + "\n"
