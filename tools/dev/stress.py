#!/usr/bin/python3
"""./dev stress TEST [N]: runs one Meson test N times on each runtime backend.

A test that crashes or flakes is a defect to find, not to re-run: this runs
it many times with a fresh MALLOC_PERTURB_ each run (freed memory is filled
with a new byte, so a use after free reads garbage rather than the old
value), both backends, two runs at a time, and keeps the log of every
failed run. It prints one line per backend, "TEST BACKEND: N runs, F failed",
and exits 1 if any run failed.

Options: --build DIR (build, or build-asan / build-tsan), --jobs J (2),
--backends io_uring,epoll, --timeout S per run (the test's own), and
--gtest_filter=... passed to the test binary.
"""
import argparse
import concurrent.futures
import json
import os
import random
import subprocess
import sys


def find_test(build_dir, name):
    tests = json.loads(
        subprocess.check_output(['meson', 'introspect', build_dir, '--tests'], text=True))
    for test in tests:
        if test['name'] == name:
            return test
    names = ', '.join(sorted(t['name'] for t in tests))
    sys.exit(f'stress: no test named {name!r} in {build_dir}; tests: {names}')


def run_once(test, backend, index, extra_args, timeout, log_dir):
    env = dict(os.environ)
    env.update(test['env'])
    env['UXDS_RUNTIME'] = backend
    env['MALLOC_PERTURB_'] = str(random.randint(1, 255))
    cmd = test['cmd'] + extra_args
    try:
        done = subprocess.run(cmd, env=env, cwd=test['workdir'], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout)
        rc, output = done.returncode, done.stdout
    except subprocess.TimeoutExpired as e:
        rc, output = 'timeout', (e.stdout or b'') + f'\n[stress: timed out after {timeout} s]\n'.encode()
    except OSError as e:  # the binary being rebuilt meanwhile, say
        rc, output = 'not started', f'[stress: {e}]\n'.encode()
    if rc == 0:
        return None
    path = os.path.join(log_dir, f'{test["name"]}-{backend}-{index}.log')
    with open(path, 'wb') as f:
        f.write(f'# {" ".join(cmd)}\n# UXDS_RUNTIME={backend} '
                f'MALLOC_PERTURB_={env["MALLOC_PERTURB_"]} exit {rc}\n'.encode())
        f.write(output)
    return path


def main():
    parser = argparse.ArgumentParser(usage='./dev stress TEST [N] [options]')
    parser.add_argument('test')
    parser.add_argument('runs', nargs='?', type=int, default=200)
    parser.add_argument('--build', default='build')
    parser.add_argument('--jobs', type=int, default=2)
    parser.add_argument('--backends', default='io_uring,epoll')
    parser.add_argument('--timeout', type=float)
    args, extra = parser.parse_known_args()
    test = find_test(args.build, args.test)
    timeout = args.timeout or test.get('timeout') or 300
    log_dir = os.path.join(args.build, 'stress-logs')
    os.makedirs(log_dir, exist_ok=True)
    failed_any = False
    for backend in args.backends.split(','):
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [
                pool.submit(run_once, test, backend, i, extra, timeout, log_dir)
                for i in range(args.runs)
            ]
            logs = [f.result() for f in futures]
        failures = [log for log in logs if log is not None]
        failed_any |= bool(failures)
        print(f'{args.test} {backend}: {args.runs} runs, {len(failures)} failed', flush=True)
        for log in failures[:10]:
            print(f'  log: {log}', flush=True)
    sys.exit(1 if failed_any else 0)


if __name__ == '__main__':
    main()
