#!/usr/bin/python3
"""./dev fuzz [SECONDS]: runs every libFuzzer target of build-asan longer.

The fuzzers are the Meson tests whose names end in "_fuzz" (fuzz/meson.build,
tests/xds/resources/meson.build); each runs here with its test's seeds and
options, but for SECONDS (default 60) and without the test's run limit, one
after the other. New inputs are kept in build-asan/fuzz-corpus/<name>/, so
a later run starts where this one stopped. Prints one line per fuzzer:
executions, coverage (libFuzzer's final cov/ft), and the crash artifact if
any; exits 1 if any fuzzer crashed (or failed to run).

Options: --build DIR (build-asan), --only NAME[,NAME] (fuzzer test names).
"""
import argparse
import json
import os
import re
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('seconds', nargs='?', type=int, default=60)
    parser.add_argument('--build', default='build-asan')
    parser.add_argument('--only', default='')
    args = parser.parse_args()

    tests = json.loads(
        subprocess.check_output(['meson', 'introspect', args.build, '--tests'], text=True))
    fuzzers = [t for t in tests if t['name'].endswith('_fuzz')]
    if args.only:
        wanted = set(args.only.split(','))
        fuzzers = [t for t in fuzzers if t['name'] in wanted]
    if not fuzzers:
        print(f'no fuzzers in {args.build} (they need a clang build)', file=sys.stderr)
        return 1
    targets = sorted({os.path.relpath(t['cmd'][0], args.build) for t in fuzzers})
    # A seed list given as @FILE is generated (tests/xds/resources): build it too.
    for t in fuzzers:
        targets += [os.path.relpath(a[len('-seed_inputs=@'):], args.build)
                    for a in t['cmd'][1:] if a.startswith('-seed_inputs=@')]
    subprocess.check_call(['ninja', '-C', args.build] + sorted(set(targets)),
                          stdout=subprocess.DEVNULL)

    failed = 0
    for t in sorted(fuzzers, key=lambda t: t['name']):
        name = t['name']
        corpus = os.path.join(args.build, 'fuzz-corpus', name)
        os.makedirs(corpus, exist_ok=True)
        options = [a for a in t['cmd'][1:]
                   if not a.startswith(('-runs=', '-max_total_time='))]
        cmd = [t['cmd'][0], f'-max_total_time={args.seconds}'] + options + [corpus]
        env = dict(os.environ)
        env.update(t.get('env', {}))
        log_path = os.path.join(args.build, 'fuzz-corpus', name + '.log')
        with open(log_path, 'w') as log:
            rc = subprocess.call(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, env=env)
        with open(log_path, errors='replace') as log:
            text = log.read()
        runs = re.findall(r'stat::number_of_executed_units: (\d+)', text)
        done = re.findall(r'#\d+\s+DONE\s+cov: (\d+) ft: (\d+)', text)
        if not done:
            done = re.findall(r'#\d+\s+\w+\s+cov: (\d+) ft: (\d+)', text)
        artifact = re.findall(r'Test unit written to (\S+)', text)
        line = (f'{name}: {runs[-1] if runs else "?"} executions, '
                f'cov {done[-1][0] if done else "?"} ft {done[-1][1] if done else "?"}')
        if rc != 0:
            failed += 1
            line += f', FAILED (exit {rc})'
            line += f', crash input {artifact[-1]}' if artifact else ''
            line += f', log {log_path}'
        print(line, flush=True)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
