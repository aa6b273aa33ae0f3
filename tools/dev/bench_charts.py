"""PNG charts of a ./dev bench report (Debian's python3-matplotlib).

Each chart shows uxds beside what it is compared with in the same run; a
chart whose measurements are missing is left out rather than drawn empty.
"""
import os

import matplotlib

matplotlib.use("Agg")  # no display on a build machine
import matplotlib.pyplot as plt  # noqa: E402

import gbench  # noqa: E402
from bench_figures import GRPC, H2O, RING_SIZES  # noqa: E402

SERVERS = [("uxds-io_uring-1loop", "uxds io_uring, 1 loop"), ("uxds-io_uring-2loop", "uxds io_uring, 2 loops"),
           ("uxds-epoll-1loop", "uxds epoll, 1 loop"), (GRPC, "gRPC C++ 1.51"), (H2O, "h2o static file (ceiling)")]


def write_all(out, report):
    """Writes every chart it has data for; returns [(file name, title)]."""
    charts = []
    inputs = {ring_chart: "ring_pick_bench", server_rps_chart: "servers", server_latency_chart: "servers",
              client_chart: "clients"}
    for fn, needs in inputs.items():
        if needs not in report["raw"]:  # that step did not run (--only) or failed: noted already
            continue
        try:
            made = fn(out, report["raw"])
        except Exception as e:  # missing data or a plotting error: that chart only
            report["failed_steps"][f"chart {fn.__name__}"] = f"{type(e).__name__}: {e}"
            plt.close("all")
            made = None
        if made:
            charts.append(made)
    return charts


def save(fig, out, name, title):
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=110)
    plt.close(fig)
    return name, title


def ring_chart(out, raw):
    medians = gbench.Medians("ring_pick_bench", raw["ring_pick_bench"])
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for bench, label, style in (("BM_HashAndPick", "uxds ring pick", "o-"),
                                ("BM_HashAndBinarySearch", "binary search (Envoy, gRPC)", "s--"),
                                ("BM_HashAndRandomRead", "floor: hash + one random read", "^:")):
        ax.plot(RING_SIZES, [medians.real_ns(f"{bench}/{s}") for s in RING_SIZES], style, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")  # 3 ns to 1 µs: a linear axis flattens the pick onto its floor
    ax.set_xlabel("ring entries")
    ax.set_ylabel("ns per hash + pick (median, log scale)")
    ax.grid(True, alpha=0.3)
    ax.legend()
    ax.set_title("Hash + pick latency against ring size")
    return save(fig, out, "ring_pick.png", "Hash + pick latency against ring size")


def grouped_bars(ax, groups, series, values, ylabel):
    width = 0.8 / len(series)
    for i, (key, label) in enumerate(series):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, [values(group, key) for group in groups], width, label=label)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)


def server_rps_chart(out, raw):
    servers = raw["servers"]
    shapes = servers["shapes"]
    present = [(k, label) for k, label in SERVERS if k in servers["medians_rps"][shapes[0]]]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    grouped_bars(ax, [s.replace("x", " × ") for s in shapes], present,
                 lambda g, k: servers["medians_rps"][g.replace(" × ", "x")][k], "requests/s (median)")
    ax.set_xlabel("h2load connections × streams")
    ax.legend(fontsize=8)
    ax.set_title("Server unary requests/s under h2load")
    return save(fig, out, "server_rps.png", "Server unary requests/s under h2load")


def server_latency_chart(out, raw):
    servers = raw["servers"]
    shapes = servers["shapes"]
    if not servers["latency_us"][shapes[0]]:
        return None
    present = [(k, label) for k, label in SERVERS if k in servers["latency_us"][shapes[0]]]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, p in zip(axes, ("p50", "p99")):
        grouped_bars(ax, [s.replace("x", " × ") for s in shapes], present,
                     lambda g, k: servers["latency_us"][g.replace(" × ", "x")][k][p], f"{p} latency (µs)")
        ax.set_yscale("log")
        ax.set_xlabel("h2load connections × streams")
        ax.set_title(f"{p} request latency")
    axes[0].legend(fontsize=7)
    return save(fig, out, "server_latency.png", "Server request latency percentiles under h2load")


def client_chart(out, raw):
    clients = raw["clients"]
    concurrency = sorted(clients["calls_per_s"]["uxds"], key=int)
    series = [("uxds", "uxds Channel"), (GRPC, "gRPC C++ 1.51 xDS client")]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    grouped_bars(axes[0], concurrency, series, lambda g, k: clients["calls_per_s"][k][g], "calls/s (median)")
    axes[0].set_title("Unary calls/s through xds:///")
    grouped_bars(axes[1], concurrency, series, lambda g, k: clients["cpu_us_per_call"][k][g],
                 "client CPU µs per call (median)")
    axes[1].set_title("Client CPU per call")
    for ax in axes:
        ax.set_xlabel("calls in flight")
    axes[0].legend(fontsize=8)
    return save(fig, out, "client_calls.png", "Client calls/s and CPU per call through xds:///")
