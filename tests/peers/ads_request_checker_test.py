"""The request checker of the fake control plane, on its own: the rules it
enforces are covered through the control plane in
fake_control_plane_selftest.cc; this covers what a socket test cannot force,
the order in which grpcio's threads report a request and the end of its call.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ads_request_checker import RequestChecker  # noqa: E402
import protoload  # noqa: E402

PROTO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")
discovery_pb2 = protoload.load(
    ["envoy/service/discovery/v3/discovery.proto"], proto_paths=[PROTO_DIR], grpc_services=False
).messages("envoy/service/discovery/v3/discovery.proto")

CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster"


def request(names, node=False, nonce="", version=""):
    message = discovery_pb2.DiscoveryRequest(
        type_url=CDS, resource_names=names, response_nonce=nonce, version_info=version
    )
    if node:
        message.node.id = "n"
    return message


class RequestCheckerTest(unittest.TestCase):
    def test_an_ack_checked_after_its_stream_closed_is_still_of_that_stream(self):
        checker = RequestChecker()
        self.assertEqual(checker.check(1, request(["c1"], node=True)), [])
        checker.response_sent(1, CDS, "v1", "nonce-1")
        # The ACK arrived before the call ended, but its reader thread got
        # the lock only after the call-done callback.
        checker.stream_closed(1)
        self.assertEqual(checker.check(1, request(["c1"], nonce="nonce-1", version="v1")), [])

    def test_a_new_stream_still_needs_the_node_and_its_own_nonces(self):
        checker = RequestChecker()
        checker.check(1, request(["c1"], node=True))
        checker.response_sent(1, CDS, "v1", "nonce-1")
        checker.stream_closed(1)
        self.assertEqual(
            checker.check(2, request(["c1"], nonce="nonce-1", version="v1")),
            [
                f"stream 2, {CDS}: the first request of the stream has no node",
                f"stream 2, {CDS}: response_nonce 'nonce-1' was not sent for this type on this stream",
            ],
        )


if __name__ == "__main__":
    unittest.main()
