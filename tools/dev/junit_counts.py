"""Prints "<passed> <failed>" test cases from a Meson JUnit report.

A test executable that crashed or timed out before writing its own gtest
report counts as one failure, so a crash can never look like a pass.
"""
import sys
import xml.etree.ElementTree as ET


def main() -> None:
    path = sys.argv[1]
    meson_rc = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    passed = failed = 0
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        print(f"0 {1 if meson_rc else 0}")
        return
    for suite in root.iter("testsuite"):
        cases = list(suite.iter("testcase"))
        for case in cases:
            bad = case.find("failure") is not None or case.find("error") is not None
            skipped = case.find("skipped") is not None
            if bad:
                failed += 1
            elif not skipped:
                passed += 1
    if meson_rc and failed == 0:
        failed = 1
    print(f"{passed} {failed}")


if __name__ == "__main__":
    main()
