#!/usr/bin/python3
"""100 Listener updates to an xDS-enabled server under load: no call fails.

uxds control-plane serves the Listener of one `uxds serve`; `uxds call`
keeps 8 calls in flight to it (a host:port channel, so only the server's
xDS side is under test) while the Listener's filter chain is renamed 100
times, 0.1 s apart. A36: each new version drains every connection accepted
under the older one (GOAWAY, a PING, the final GOAWAY; the drain grace is
1 s here), and the client reconnects. The test fails if any call fails,
if no call was made, if the server ever reports not serving after it
first served, or if the connections were not in fact replaced (fewer than
20 different client ports seen on the server's port: without drains the
8 calls share one connection).

  listener_updates_under_load.py UXDS_BINARY OUT_DIR
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ.get('UXDS_SOURCE_ROOT', '.'), 'tools', 'dev'))
import soak  # noqa: E402

UPDATES = 100


def client_ports(server_port):
    """The client ports of the TCP connections to server_port now."""
    out = subprocess.run(['ss', '-tnH', f'( sport = :{server_port} )'], capture_output=True,
                         text=True).stdout
    ports = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 5:
            ports.add(fields[4].rsplit(':', 1)[-1])
    return ports


def main():
    uxds, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    cp_port, port = soak.free_port(), soak.free_port()
    config = soak.ConfigDir(os.path.join(out, 'xds'), [port], 1)
    bootstrap = os.path.join(out, 'bootstrap.json')
    with open(bootstrap, 'w') as f:
        json.dump({'xds_servers': [{'server_uri': f'127.0.0.1:{cp_port}',
                                    'channel_creds': [{'type': 'insecure'}]}],
                   'node': {'id': 'listener-updates'},
                   'server_listener_resource_name_template': soak.SERVER_TEMPLATE}, f)
    problems = []
    serving = []  # the server's serving-status lines, in order
    counter = soak.CallCounter([])
    processes = []
    try:
        processes.append(soak.Process('control-plane', [
            uxds, 'control-plane', '--dir', config.path, '--listen', f'127.0.0.1:{cp_port}']))
        processes.append(soak.Process('server', [
            uxds, 'serve', '--bootstrap', bootstrap, '--listen', f'127.0.0.1:{port}',
            '--drain-grace-ms', '1000'], on_line=serving.append))
        deadline = time.monotonic() + 30
        while not any(b'"serving":true' in line for line in serving):
            gone = [p.name for p in processes if not p.alive()]
            if gone or time.monotonic() > deadline:
                print(f'the server did not serve within 30 s (exited: {gone})', file=sys.stderr)
                return 1
            time.sleep(0.05)
        first_serving = len(serving)
        processes.append(soak.Process('client', [
            uxds, 'call', f'127.0.0.1:{port}', '-n', str(10**12), '--concurrency', '8'],
            on_chunk=counter.feed))
        ports = set()
        for i in range(UPDATES):
            listener = soak.server_listener(port)
            listener['filter_chains'][0]['name'] = f'version-{i}'
            config.write(f'listener-server-{port}.json', listener)
            until = time.monotonic() + 0.1
            while time.monotonic() < until:
                ports |= client_ports(port)
                time.sleep(0.02)
        time.sleep(0.5)
        for p in processes:
            if not p.alive():
                problems.append(f'{p.name} exited with status {p.proc.returncode}')
    finally:
        # A crash or a sanitizer report at shutdown is a failure too.
        problems.extend(soak.stop_all(processes))
    calls, failed = counter.calls, counter.calls - counter.ok
    print(f'{UPDATES} Listener updates: {calls} calls, {failed} failed, '
          f'{len(ports)} client connections seen; {counter.summary}')
    if failed:
        problems.append(f'{failed} calls failed: ' + ' | '.join(counter.failures[:5]))
    if calls == 0:
        problems.append('no call was made')
    not_serving = [line for line in serving[first_serving:] if b'"serving":false' in line]
    if not_serving:
        problems.append(f'the server stopped serving: {not_serving[0]!r}')
    if len(ports) < 20:
        problems.append(f'only {len(ports)} client connections: the updates did not drain')
    for problem in problems:
        print('FAIL: ' + problem)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
