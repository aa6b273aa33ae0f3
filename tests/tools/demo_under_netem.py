#!/usr/bin/env python3
"""The whole demo (control plane, xDS-enabled servers, client: routing, ring
hash, failover) inside a network namespace whose loopback delays and loses
packets with `tc netem`. Every step must still pass.

usage: demo_under_netem.py UXDS_TOOL [QDISC...]
QDISC defaults to the netem delay and loss below; another qdisc can be given
to try the harness on a kernel without sch_netem (e.g. `tbf rate 200mbit
burst 64kb latency 50ms`). Exits 77 (a skip for Meson) with the reason where
the machine does not allow a network namespace or the qdisc.
"""
import shlex
import shutil
import subprocess
import sys

SKIP = 77
# 20 ms each way (+-5 ms) and 1 % of packets lost, both directions of lo.
DEFAULT_QDISC = ["netem", "delay", "20ms", "5ms", "loss", "1%"]


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    tool = sys.argv[1]
    qdisc = sys.argv[2:] or DEFAULT_QDISC
    for program in ("unshare", "ip", "tc"):
        if shutil.which(program) is None:
            skip(f"{program} is not installed (Debian: util-linux, iproute2)")
    # -r: a user namespace too, so this works without root where allowed.
    probe = subprocess.run(["unshare", "-rn", "ip", "link", "set", "lo", "up"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        skip("cannot make a network namespace: " + (probe.stderr.strip() or "unshare failed"))
    script = (
        "ip link set lo up || exit 1\n"
        f"if ! err=$(tc qdisc add dev lo root {shlex.join(qdisc)} 2>&1); then\n"
        f"  echo \"SKIP: tc qdisc {shlex.join(qdisc)}: $err\"; exit {SKIP}\n"
        "fi\n"
        "tc qdisc show dev lo\n"
        f"exec {shlex.quote(tool)} demo\n")
    run = subprocess.run(["unshare", "-rn", "sh", "-c", script], capture_output=True,
                         text=True, timeout=600)
    print(run.stdout, end="")
    print(run.stderr, end="", file=sys.stderr)
    if run.returncode == SKIP:
        sys.exit(SKIP)
    if run.returncode != 0 or "uxds demo: PASS" not in run.stdout:
        print(f"FAIL: the demo under `{' '.join(qdisc)}` exited {run.returncode}")
        sys.exit(1)
    print(f"PASS: every demo step under `{' '.join(qdisc)}`")


if __name__ == "__main__":
    main()
