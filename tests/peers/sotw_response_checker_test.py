#!/usr/bin/python3
"""Proves sotw_response_checker.py: each rule it checks is broken once on
purpose and must be reported, and a well-behaved exchange reports nothing.
Run by tests/tools/control_plane_test.cc (exit status 0: all good)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import protoload  # noqa: E402
from sotw_response_checker import SotwResponseChecker  # noqa: E402

PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")
pb = protoload.load(
    ["envoy/service/discovery/v3/discovery.proto"], proto_paths=[PROTO_DIR], grpc_services=False
).messages("envoy/service/discovery/v3/discovery.proto")

LDS = "type.googleapis.com/envoy.config.listener.v3.Listener"
EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"


def named(name, extra=b""):
    """A serialized resource whose field 1 is `name`."""
    data = name.encode()
    return b"\x0a" + bytes([len(data)]) + data + extra


def request(type_url, names, nonce="", nack=None):
    r = pb.DiscoveryRequest(type_url=type_url, resource_names=names, response_nonce=nonce)
    if nack is not None:
        r.error_detail.message = nack
    return r


def response(type_url, version, nonce, resources=(), errors=()):
    r = pb.DiscoveryResponse(type_url=type_url, version_info=version, nonce=nonce)
    for value in resources:
        r.resources.add(type_url=type_url, value=value)
    for name in errors:
        r.resource_errors.add().resource_name.name = name
    return r


class CheckerTest(unittest.TestCase):
    def setUp(self):
        self.checker = SotwResponseChecker()

    def check(self, r):
        return self.checker.on_response(r)

    def test_a_good_exchange_passes(self):
        self.checker.on_request(request(LDS, ["a", "b"]))
        self.assertEqual(self.check(response(LDS, "1", "n1", [named("a"), named("b")])), [])
        self.checker.on_request(request(LDS, ["a", "b"], "n1"))
        self.assertEqual(self.check(response(LDS, "2", "n2", [named("a"), named("b")])), [])
        self.checker.on_request(request(EDS, ["c"]))
        self.assertEqual(self.check(response(EDS, "2", "n3", [named("c")])), [])
        self.assertEqual(self.check(response(EDS, "3", "n4", [named("c", b"\x10\x01")])), [])

    def test_nonce_reused_or_missing(self):
        self.checker.on_request(request(LDS, ["a"]))
        self.assertEqual(self.check(response(LDS, "1", "n1", [named("a")])), [])
        self.assertIn("used twice", " ".join(self.check(response(LDS, "1", "n1", [named("a")]))))
        self.assertIn("empty nonce", " ".join(self.check(response(LDS, "1", "", [named("a")]))))
        self.assertIn("empty version_info", " ".join(self.check(response(LDS, "", "n9"))))

    def test_type_never_requested_and_wrong_any(self):
        self.assertIn("never requested", " ".join(self.check(response(EDS, "1", "n1"))))
        self.checker.on_request(request(LDS, ["a"]))
        r = response(LDS, "1", "n2")
        r.resources.add(type_url=EDS, value=named("a"))
        self.assertIn("a resource of type", " ".join(self.check(r)))

    def test_unsubscribed_and_twice_named(self):
        self.checker.on_request(request(LDS, ["a"]))
        self.assertIn("not subscribed", " ".join(self.check(response(LDS, "1", "n1", [named("z")]))))
        self.assertIn("twice in one response",
                      " ".join(self.check(response(LDS, "1", "n2", [named("a")], errors=["a"]))))

    def test_wildcard_allows_any_name(self):
        self.checker.on_request(request(LDS, []))
        self.assertEqual(self.check(response(LDS, "1", "n1", [named("z")])), [])

    def test_eds_resent_unchanged(self):
        self.checker.on_request(request(EDS, ["c"]))
        self.assertEqual(self.check(response(EDS, "1", "n1", [named("c")])), [])
        self.assertIn("sent again unchanged", " ".join(self.check(response(EDS, "2", "n2", [named("c")]))))
        # Unsubscribed and subscribed again: sending it again is right.
        self.checker.on_request(request(EDS, [], "n2"))
        self.checker.on_request(request(EDS, ["c"], "n2"))
        self.assertEqual(self.check(response(EDS, "2", "n3", [named("c")])), [])

    def test_nacked_version_resent(self):
        self.checker.on_request(request(LDS, ["a"]))
        self.assertEqual(self.check(response(LDS, "1", "n1", [named("a")])), [])
        self.checker.on_request(request(LDS, ["a"], "n1", nack="bad"))
        self.assertIn("NACKed version", " ".join(self.check(response(LDS, "1", "n2", [named("a")]))))
        self.assertEqual(self.check(response(LDS, "2", "n3", [named("a")])), [])


if __name__ == "__main__":
    unittest.main()
