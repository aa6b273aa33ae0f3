#!/usr/bin/python3
"""./dev soak [MINUTES]: uxds under config churn for a long time, watched for growth.

On loopback, with the built `uxds` tool:
  - a control plane (`uxds control-plane`) serving a directory this script
    rewrites every --churn-s seconds: each cluster's endpoints (a random
    non-empty subset of the backends, random locality weights), one
    cluster's LB policy (ROUND_ROBIN / RING_HASH) every few seconds, and a
    fourth cluster added, routed to, unrouted and deleted in turn, make
    before break, as a control plane that never breaks calls does;
  - the control plane stopped (SIGTERM) and started again on the same port
    every --restart-s seconds;
  - --backends xDS-enabled servers (`uxds serve`), each taking its Listener
    from that control plane;
  - one client (`uxds call`, --concurrency calls at a time, without end)
    calling xds:///soak, whose route splits the calls by weight over the
    clusters and hashes some of them on a header (ring_hash picks).
Every second it samples each process's resident set (VmRSS) and open fds
and writes them, with the calls made and failed so far, to soak.csv; at
the end it draws soak.png (RSS and fds over time, one line per process).

It fails (exit 1) when
  - a call failed: every call has a cached config to go by, and every
    endpoint it may be sent to is serving (A88: a control plane that is
    down changes nothing the client has);
  - after the warm-up (the first fifth of the run, at least 60 s when the
    run is long enough), a process's RSS grows: the median of the last
    quarter of the samples is over the median of the first quarter by more
    than 10 % + 2 MiB (--no-rss-verdict skips this: AddressSanitizer's
    quarantine grows the resident set on purpose);
  - its fd count grows: every sample of the last quarter is above every
    sample of the first (the client's connections follow the endpoint
    churn, so only a rise that never comes back down counts);
  - no call ends for 10 s (a stuck client: a call that hangs still ends at
    its 5 s deadline);
  - a process exits before the end, or does not exit cleanly when stopped
    (uxds call 130 after SIGINT, the others 0 after SIGTERM: a crash or a
    sanitizer report at shutdown counts), or the control plane does not
    come back after a restart within 30 s.
The control plane is sampled too, but not judged: it is a new process
after each restart. The binaries run from copies in OUT/bin, so a build
meanwhile changes nothing under them.

With --kill the control plane is restarted with SIGKILL; --check-recovery
then checks, at the end, that every process's fd count comes back to what
it was once the calls started (instead of judging the counts sampled
during the restarts, where reconnections come and go), and that a last endpoint change (every
cluster on the last backend) still reaches the client: its watches survived
(the test tools_control_plane_restarts).

Options: --build DIR (build), --uxds PATH (DIR/tools/uxds/uxds), --out DIR
(DIR/soak-<time>), --churn-s (0: no churn), --restart-s, --backends,
--concurrency, --seed, --no-rss-verdict, --kill, --check-recovery.
"""
import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from soak_plot import write_plot  # noqa: E402

LISTENER = 'type.googleapis.com/envoy.config.listener.v3.Listener'
ROUTE = 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration'
CLUSTER = 'type.googleapis.com/envoy.config.cluster.v3.Cluster'
ENDPOINTS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment'
HCM = ('type.googleapis.com/'
       'envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager')
ROUTER = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router'
SERVER_TEMPLATE = 'grpc/server?xds.resource.listening_address=%s'
TARGET = 'soak'
STALL_S = 10
HASH_HEADER = 'x-soak-user'
STEADY_CLUSTERS = ['c0', 'c1', 'c2']
CHURNED_CLUSTER = 'c3'


def log(message):
    print(f'soak: {message}', file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def ads():
    return {'ads': {}, 'resource_api_version': 'V3'}


def router():
    return {'name': 'router', 'typed_config': {'@type': ROUTER}}


def client_listener():
    hcm = {'@type': HCM, 'rds': {'config_source': ads(), 'route_config_name': 'soak-route'},
           'http_filters': [router()]}
    return {'@type': LISTENER, 'name': TARGET, 'api_listener': {'api_listener': hcm}}


def route(clusters, rng):
    weighted = [{'name': c, 'weight': rng.randint(1, 10)} for c in clusters]
    return {
        '@type': ROUTE, 'name': 'soak-route',
        'virtual_hosts': [{
            'name': 'soak', 'domains': ['*'],
            'routes': [{
                'match': {'prefix': ''},
                'route': {'weighted_clusters': {'clusters': weighted},
                          'hash_policy': [{'header': {'header_name': HASH_HEADER}}]},
            }],
        }],
    }


def cluster(name, lb_policy):
    resource = {'@type': CLUSTER, 'name': name, 'type': 'EDS',
                'eds_cluster_config': {'eds_config': ads(), 'service_name': name + '-endpoints'},
                'lb_policy': lb_policy}
    if lb_policy == 'RING_HASH':
        resource['ring_hash_lb_config'] = {'minimum_ring_size': '64', 'maximum_ring_size': '1024'}
    return resource


def endpoints(name, ports, rng):
    chosen = rng.sample(ports, rng.randint(1, len(ports)))
    localities = []
    for i, port in enumerate(chosen):
        localities.append({
            'locality': {'zone': f'z{i}'}, 'priority': 0,
            'load_balancing_weight': rng.randint(1, 5),
            'lb_endpoints': [{'endpoint': {'address': {
                'socket_address': {'address': '127.0.0.1', 'port_value': port}}}}],
        })
    return {'@type': ENDPOINTS, 'cluster_name': name + '-endpoints', 'endpoints': localities}


def server_listener(port):
    address = f'127.0.0.1:{port}'
    route_config = {'name': 'local', 'virtual_hosts': [{
        'name': 'all', 'domains': ['*'],
        'routes': [{'match': {'prefix': '/'}, 'non_forwarding_action': {}}]}]}
    hcm = {'@type': HCM, 'route_config': route_config, 'http_filters': [router()]}
    return {'@type': LISTENER, 'name': SERVER_TEMPLATE.replace('%s', address),
            'address': {'socket_address': {'address': '127.0.0.1', 'port_value': port}},
            'filter_chains': [{'name': 'soak',
                               'filters': [{'name': 'hcm', 'typed_config': hcm}]}]}


class ConfigDir:
    """The control plane's directory; every file is written whole (written
    beside it, then renamed in), so the control plane never reads half a file."""

    def __init__(self, path, backend_ports, seed):
        self.path = path
        self.staging = path + '.staging'
        for d in (path, self.staging):
            shutil.rmtree(d, ignore_errors=True)
        os.makedirs(path)
        os.makedirs(self.staging)
        self.ports = backend_ports
        self.rng = random.Random(seed)
        self.tick = 0
        self.churned_state = 0  # 0 absent, 1 defined, 2 routed to, 3 unrouted
        self.write('listener-soak.json', client_listener())
        for port in backend_ports:
            self.write(f'listener-server-{port}.json', server_listener(port))
        for name in STEADY_CLUSTERS:
            self.write(f'cluster-{name}.json', cluster(name, 'ROUND_ROBIN'))
            self.write(f'endpoints-{name}.json', endpoints(name, backend_ports, self.rng))
        self.write('route-soak.json', route(STEADY_CLUSTERS, self.rng))

    def write(self, name, resource):
        staged = os.path.join(self.staging, name)
        with open(staged, 'w') as f:
            json.dump(resource, f)
        os.rename(staged, os.path.join(self.path, name))

    def remove(self, name):
        os.unlink(os.path.join(self.path, name))

    def pin(self, port):
        """Every cluster's endpoints: the one backend on `port`."""
        live = STEADY_CLUSTERS + ([CHURNED_CLUSTER] if self.churned_state in (1, 2, 3) else [])
        for name in live:
            self.write(f'endpoints-{name}.json', endpoints(name, [port], self.rng))

    def churn(self):
        """One step of churn: endpoints always; the rest in turn."""
        self.tick += 1
        live = STEADY_CLUSTERS + ([CHURNED_CLUSTER] if self.churned_state in (1, 2, 3) else [])
        for name in live:
            self.write(f'endpoints-{name}.json', endpoints(name, self.ports, self.rng))
        if self.tick % 5 == 0:
            policy = 'RING_HASH' if (self.tick // 5) % 2 else 'ROUND_ROBIN'
            self.write('cluster-c0.json', cluster('c0', policy))
        if self.tick % 3 != 0:
            return
        # Make before break: a cluster exists before a route names it and
        # is deleted only once no route does.
        self.churned_state = (self.churned_state + 1) % 4
        if self.churned_state == 1:
            self.write(f'cluster-{CHURNED_CLUSTER}.json', cluster(CHURNED_CLUSTER, 'RING_HASH'))
            self.write(f'endpoints-{CHURNED_CLUSTER}.json',
                       endpoints(CHURNED_CLUSTER, self.ports, self.rng))
        elif self.churned_state == 2:
            self.write('route-soak.json', route(STEADY_CLUSTERS + [CHURNED_CLUSTER], self.rng))
        elif self.churned_state == 3:
            self.write('route-soak.json', route(STEADY_CLUSTERS, self.rng))
        else:
            self.remove(f'cluster-{CHURNED_CLUSTER}.json')
            self.remove(f'endpoints-{CHURNED_CLUSTER}.json')


class Process:
    """A child whose stdout is read on a thread: each line to `on_line`, or
    raw chunks to `on_chunk`."""

    def __init__(self, name, argv, on_line=None, on_chunk=None):
        self.name = name
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.lines = []
        self.on_line = on_line
        self.on_chunk = on_chunk
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        fd = self.proc.stdout.fileno()
        pending = b''
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            if self.on_chunk is not None:
                self.on_chunk(chunk)
                continue
            pending += chunk
            *complete, pending = pending.split(b'\n')
            for line in complete:
                if self.on_line is not None:
                    self.on_line(line)

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.alive():
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(5)
        return self.proc.returncode


class CallCounter:
    """Counts `uxds call`'s JSON lines from raw chunks: a line is a call,
    `"status":"OK"` a good one (the summary line has neither form)."""

    def __init__(self, backend_names):
        self.backend_names = backend_names
        self.lock = threading.Lock()
        self.calls = 0
        self.ok = 0
        self.failures = []  # the first few failed calls' lines
        self.summary = None
        self.tail = b''
        self.by_backend = {}  # backend name -> calls it answered

    def feed(self, chunk):
        data = self.tail + chunk
        end = data.rfind(b'\n') + 1
        complete, self.tail = data[:end], data[end:]
        lines = complete.count(b'\n')
        ok = complete.count(b'"status":"OK"')
        summary = complete.count(b'{"summary"')
        backends = {}
        for name in self.backend_names:
            backends[name] = complete.count(b'"backend":"' + name.encode() + b'"')
        with self.lock:
            for name, n in backends.items():
                self.by_backend[name] = self.by_backend.get(name, 0) + n
            self.calls += lines - summary
            self.ok += ok
            if lines - summary != ok and len(self.failures) < 20:
                for line in complete.split(b'\n'):
                    if line and b'"status":"OK"' not in line and not line.startswith(b'{"summary"'):
                        self.failures.append(line.decode(errors='replace'))
            if summary:
                start = complete.rfind(b'{"summary"')
                self.summary = complete[start:complete.index(b'\n', start)].decode(errors='replace')

    def counts(self):
        with self.lock:
            return self.calls, self.calls - self.ok

    def backend_counts(self):
        with self.lock:
            return dict(self.by_backend)


def sample(pid):
    """(VmRSS in KiB, open fds) of `pid`, or None once it is gone."""
    try:
        with open(f'/proc/{pid}/status') as f:
            rss = next(int(line.split()[1]) for line in f if line.startswith('VmRSS:'))
        return rss, len(os.listdir(f'/proc/{pid}/fd'))
    except (OSError, StopIteration):
        return None


def copy_tool(uxds, bin_dir):
    """Copies the uxds binary, its JSON converter and their descriptor set
    into bin_dir and points the copy at them: a build during a long soak
    relinks the originals under the running processes (a restart would find
    no binary, or a new one)."""
    build_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(uxds))))
    os.makedirs(bin_dir, exist_ok=True)
    copies = {}
    for name, source, variable in [
            ('uxds', os.path.abspath(uxds), None),
            ('uxds-json-to-proto',
             os.path.join(build_root, 'tools', 'json_to_proto', 'uxds-json-to-proto'),
             'UXDS_JSON_TO_PROTO'),
            ('xds_resources_descriptors.pb',
             os.path.join(build_root, 'proto', 'xds_resources_descriptors.pb'),
             'UXDS_RESOURCE_DESCRIPTORS')]:
        copies[name] = os.path.join(bin_dir, name)
        shutil.copy2(source, copies[name])
        if variable is not None:
            os.environ[variable] = copies[name]
    return copies['uxds']


def stop_all(processes):
    """Stops `processes`, the last first: uxds call (named 'client') with
    SIGINT, the others with SIGTERM. Returns one problem for each that did
    not exit cleanly (uxds call 128 + SIGINT, the others 0): a crash or a
    sanitizer report at shutdown."""
    problems = []
    for p in reversed(processes):
        client = p.name == 'client'
        rc = p.stop(signal.SIGINT if client else signal.SIGTERM)
        if rc != (128 + signal.SIGINT if client else 0):
            problems.append(f'{p.name} exited with {rc} when stopped')
    return problems


def settled_fds(processes, counter, timeout=30):
    """Each process's fd count once the client's calls succeed and the
    count has held still for 2 s (every connection made)."""
    deadline = time.monotonic() + timeout
    last, steady_since = None, time.monotonic()
    while time.monotonic() < deadline:
        calls, failed = counter.counts()
        now = {p.name: (sample(p.proc.pid) or (0, -1))[1] for p in processes}
        if now != last:
            last, steady_since = now, time.monotonic()
        elif calls > failed and time.monotonic() - steady_since >= 2:
            return now
        time.sleep(0.2)
    return last


def check_recovery(processes, start_fds, counter, config, backend_ports, timeout=20):
    """After the faults: every process's fd count comes back to its start,
    and a last config change still reaches the client (its watches live):
    once every cluster's endpoints are only the last backend, a whole
    second of calls goes to it alone."""
    problems = []
    deadline = time.monotonic() + timeout
    fds = {}
    while time.monotonic() < deadline:
        fds = {p.name: (sample(p.proc.pid) or (0, -1))[1] for p in processes}
        if fds == start_fds:
            break
        time.sleep(0.2)
    else:
        problems.append(f'fd counts did not come back within {timeout} s: '
                        f'{fds} against {start_fds} at the start')
    pinned = f'server{len(backend_ports) - 1}'
    config.pin(backend_ports[-1])
    deadline = time.monotonic() + timeout
    before = counter.backend_counts()
    while time.monotonic() < deadline:
        time.sleep(1)
        after = counter.backend_counts()
        others = sum(after.get(n, 0) - before.get(n, 0) for n in after if n != pinned)
        if others == 0 and after.get(pinned, 0) > before.get(pinned, 0):
            log(f'a last endpoint change reached the client: every call goes to {pinned}')
            return problems
        before = after
    problems.append(f'a last endpoint change (every cluster on {pinned}) did not reach the '
                    f'client within {timeout} s: {counter.backend_counts()}')
    return problems


def grows(values, tolerance):
    """Whether the last quarter of `values` sits above the first."""
    quarter = len(values) // 4
    if quarter < 2:
        return False
    first, last = values[:quarter], values[-quarter:]
    return tolerance(first, last)


def rss_grows(first, last):
    return statistics.median(last) > statistics.median(first) * 1.10 + 2048


def fds_grow(first, last):
    return min(last) > max(first)


def main():
    # SIGTERM (a CI timeout) unwinds like SIGINT, so the children are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('minutes', nargs='?', type=float, default=30.0)
    parser.add_argument('--build', default='build')
    parser.add_argument('--uxds', default='')
    parser.add_argument('--out', default='')
    parser.add_argument('--churn-s', type=float, default=1.0)
    parser.add_argument('--restart-s', type=float, default=60.0)
    parser.add_argument('--backends', type=int, default=3)
    parser.add_argument('--concurrency', type=int, default=4)
    parser.add_argument('--seed', type=int, default=1)
    parser.add_argument('--no-rss-verdict', action='store_true')
    parser.add_argument('--kill', action='store_true',
                        help='restart the control plane with SIGKILL, not SIGTERM')
    parser.add_argument('--check-recovery', action='store_true',
                        help='at the end: fds back to their start, a last change reaches the client')
    args = parser.parse_args()
    uxds = args.uxds or os.path.join(args.build, 'tools', 'uxds', 'uxds')
    out = args.out or os.path.join(args.build, time.strftime('soak-%Y%m%d-%H%M%S'))
    os.makedirs(out, exist_ok=True)
    uxds = copy_tool(uxds, os.path.join(out, 'bin'))
    duration = args.minutes * 60
    warmup = min(max(60.0, duration / 5), duration / 2)

    cp_port = free_port()
    backend_ports = [free_port() for _ in range(args.backends)]
    config = ConfigDir(os.path.join(out, 'xds'), backend_ports, args.seed)
    bootstrap = os.path.join(out, 'bootstrap.json')
    with open(bootstrap, 'w') as f:
        json.dump({'xds_servers': [{'server_uri': f'127.0.0.1:{cp_port}',
                                    'channel_creds': [{'type': 'insecure'}]}],
                   'node': {'id': 'uxds-soak'},
                   'server_listener_resource_name_template': SERVER_TEMPLATE}, f)

    problems = []
    processes = []
    control_plane = None
    listening = threading.Event()

    def on_control_plane_line(line):
        if b'"event":"listening"' in line:
            listening.set()
        elif b'"event":"file_error"' in line:
            problems.append('control plane: ' + line.decode(errors='replace'))

    def stop_control_plane(cp):
        # SIGKILL: whatever it was doing. SIGTERM: it must exit cleanly (0),
        # so a crash or a sanitizer report at shutdown is seen.
        if args.kill:
            cp.stop(signal.SIGKILL)
        elif cp.stop(signal.SIGTERM) != 0:
            problems.append(f'the control plane exited with {cp.proc.returncode} on SIGTERM')

    def start_control_plane():
        listening.clear()
        cp = Process('control-plane', [uxds, 'control-plane', '--dir', config.path, '--listen',
                                       f'127.0.0.1:{cp_port}'], on_line=on_control_plane_line)
        deadline = time.monotonic() + 30
        while not listening.wait(0.05):
            if not cp.alive() or time.monotonic() > deadline:
                try:
                    held = subprocess.run(
                        ['ss', '-tanpH', f'( sport = :{cp_port} or dport = :{cp_port} )'],
                        capture_output=True, text=True).stdout
                except OSError as error:
                    held = f'(ss: {error})'
                problems.append(f'the control plane did not listen (exit {cp.proc.poll()}); '
                                f'its port: {held}')
                break
        return cp

    counter = CallCounter([f'server{i}' for i in range(args.backends)])
    csv = open(os.path.join(out, 'soak.csv'), 'w')
    csv.write('t_s,process,pid,rss_kb,fds,calls,failed_calls\n')
    series = {}  # process name -> [(t, rss_kb, fds)]
    restarts = 0
    try:
        control_plane = start_control_plane()
        for i, port in enumerate(backend_ports):
            processes.append(Process(f'server{i}', [uxds, 'serve', '--bootstrap', bootstrap,
                                                    '--listen', f'127.0.0.1:{port}',
                                                    '--hostname', f'server{i}']))
        client = Process('client', [uxds, 'call', '--bootstrap', bootstrap, f'xds:///{TARGET}',
                                    '-n', str(10**12), '--concurrency', str(args.concurrency),
                                    '--wait-for-ready', '--header', f'{HASH_HEADER}=u1'],
                         on_chunk=counter.feed)
        processes.append(client)
        start_fds = settled_fds(processes, counter) if args.check_recovery else {}
        log(f'{duration:.0f} s; writing {out}/soak.csv')
        start = time.monotonic()
        never = float('inf')
        next_churn = start + args.churn_s if args.churn_s > 0 else never
        next_restart = start + args.restart_s
        next_sample = start + 1
        last_progress = (start, 0)  # when the call count last moved, and to what
        while True:
            now = time.monotonic()
            if now - start >= duration:
                break
            if now >= next_churn:
                config.churn()
                next_churn = max(next_churn + args.churn_s, now)
            if now >= next_restart:
                stop_control_plane(control_plane)
                control_plane = start_control_plane()
                restarts += 1
                next_restart = time.monotonic() + args.restart_s
            if now >= next_sample:
                t = now - start
                calls, failed = counter.counts()
                # A call that hangs still ends at its 5 s deadline with a
                # line: a count that stands still is a client that is stuck.
                if calls != last_progress[1]:
                    last_progress = (now, calls)
                elif now - last_progress[0] > STALL_S:
                    problems.append(f'no call ended for {STALL_S} s (at {t:.0f} s, {calls} calls)')
                    break
                for p in processes + [control_plane]:
                    s = sample(p.proc.pid)
                    if s is None:
                        continue
                    csv.write(f'{t:.1f},{p.name},{p.proc.pid},{s[0]},{s[1]},{calls},{failed}\n')
                    series.setdefault(p.name, []).append((t, s[0], s[1]))
                csv.flush()
                next_sample = max(next_sample + 1, now)
            for p in processes:
                if not p.alive():
                    problems.append(f'{p.name} exited early with status {p.proc.returncode}')
            if any(not p.alive() for p in processes):
                break
            time.sleep(max(0.0, min(next_churn, next_restart, next_sample) - time.monotonic()))
        if args.check_recovery and all(p.alive() for p in processes):
            problems.extend(check_recovery(processes, start_fds, counter, config, backend_ports))
    except Exception as error:  # a harness failure still gets a verdict, CSV and plot
        problems.append(f'the harness failed: {error!r}')
    finally:
        problems.extend(stop_all(processes))
        if control_plane is not None:
            stop_control_plane(control_plane)
        csv.close()

    calls, failed = counter.counts()
    if failed:
        problems.append(f'{failed} of {calls} calls failed; the first: ' +
                        ' | '.join(counter.failures[:5]))
    if calls == 0:
        problems.append('no call was made')
    verdicts = []
    for name, points in sorted(series.items()):
        after = [p for p in points if p[0] >= warmup]
        rss = [p[1] for p in after]
        fds = [p[2] for p in after]
        judged = name != 'control-plane'
        line = (f'{name}: RSS {points[0][1] // 1024} -> {points[-1][1] // 1024} MiB, '
                f'fds {points[0][2]} -> {points[-1][2]}')
        if judged and not args.no_rss_verdict and grows(rss, rss_grows):
            problems.append(f'{name}: RSS grows after the warm-up ({line})')
        # With --check-recovery the control plane is restarted every fraction
        # of a second, so any sample may catch a reconnection with its old
        # and new sockets both open (about 15 % of them do), and a few in a
        # row at the end say nothing. The fd verdict there is the recovery
        # check: every count back to its start once the faults stop.
        if judged and not args.check_recovery and grows(fds, fds_grow):
            problems.append(f'{name}: fd count grows after the warm-up ({line})')
        verdicts.append(line + ('' if judged else ' (restarted, not judged)'))
    write_plot(os.path.join(out, 'soak.png'), series, warmup)
    for line in verdicts:
        log(line)
    log(f'{calls} calls, {failed} failed, {restarts} control-plane restarts, '
        f'{config.tick} config changes; warm-up {warmup:.0f} s')
    log(f'client summary: {counter.summary}')
    log(f'wrote {out}/soak.csv and {out}/soak.png')
    for problem in problems:
        log('FAIL: ' + problem)
    if not problems:
        log('PASS')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
