"""The rules every State-of-the-World DiscoveryRequest a client sends must
keep, checked by the fake control plane on each request it receives.

The rules (xDS protocol, "ACK/NACK and resource type instance version" and
"How the client specifies what resources to return"; NOTES "ACK / NACK"):
  - the first request of a stream carries the node, later ones do not;
  - the first request of a type on a stream names resources: an empty
    resource_names list there is the legacy wildcard, which asks for every
    resource of the type (a full LDS/CDS push);
  - resource_names holds no empty and no repeated name;
  - a non-empty response_nonce is one the server sent for that type on that
    stream;
  - a non-empty version_info is one the server sent for that type (the
    client keeps its accepted version across streams).
"""


class StreamRecord:
    def __init__(self):
        self.requests = 0
        self.types = set()  # type URLs requested on the stream
        self.nonces = {}  # type_url -> nonces sent on the stream
        self.closed = False


class RequestChecker:
    """Not thread-safe: the control plane calls it with its lock held."""

    def __init__(self):
        self._streams = {}  # stream id -> StreamRecord
        self._versions = {}  # type_url -> versions sent on any stream

    def _stream(self, stream_id):
        return self._streams.setdefault(stream_id, StreamRecord())

    def response_sent(self, stream_id, type_url, version_info, nonce):
        self._stream(stream_id).nonces.setdefault(type_url, set()).add(nonce)
        self._versions.setdefault(type_url, set()).add(version_info)

    def stream_closed(self, stream_id):
        # The record stays: grpcio reads requests on another thread than the
        # one that learns the call ended, so a request received before the
        # end may be checked after it. Dropping the record made such a
        # request look like the first of a new stream (no node, an unknown
        # nonce): a false violation. Stream ids are never reused, and a test
        # opens few streams.
        self._stream(stream_id).closed = True

    def check(self, stream_id, request):
        """The rules `request` breaks, as text (empty if none)."""
        stream = self._stream(stream_id)
        type_url = request.type_url
        names = list(request.resource_names)
        violations = []
        first_of_stream = stream.requests == 0
        stream.requests += 1
        if first_of_stream and not request.HasField("node"):
            violations.append("the first request of the stream has no node")
        if not first_of_stream and request.HasField("node"):
            violations.append("a node in a request that is not the first of the stream")
        if type_url not in stream.types:
            stream.types.add(type_url)
            if not names:
                violations.append("the first request of the type has no resource names (wildcard)")
        if "" in names:
            violations.append("an empty resource name")
        if len(set(names)) != len(names):
            violations.append(f"repeated resource names {names}")
        nonce = request.response_nonce
        if nonce and nonce not in stream.nonces.get(type_url, set()):
            violations.append(f"response_nonce {nonce!r} was not sent for this type on this stream")
        version = request.version_info
        if version and version not in self._versions.get(type_url, set()):
            violations.append(f"version_info {version!r} was never sent for this type")
        return [f"stream {stream_id}, {type_url}: {v}" for v in violations]
