#!/usr/bin/env python3
"""Prints the ninja targets of the tests in the 'tsan' suite of a Meson build
directory, so that the TSan build compiles only what it runs."""
import json
import os
import subprocess
import sys

build_dir = os.path.abspath(sys.argv[1])
tests = json.loads(subprocess.check_output(["meson", "introspect", build_dir, "--tests"]))
for test in tests:
    if any(suite.split(":")[-1] == "tsan" for suite in test["suite"]):
        print(os.path.relpath(test["cmd"][0], build_dir))
