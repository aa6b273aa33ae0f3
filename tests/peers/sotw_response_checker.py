"""Checks, from the client's side, that an ADS (State of the World) server's
responses on one call obey the protocol's rules; used by ads_client.py
--check-sotw-responses against `uxds control-plane`.

Rules (each break is one violation message):
  - every response has a non-empty version_info and a nonce never used
    before on the call;
  - its type_url was requested on the call, and every resource is an Any of
    that type, named once (resources and TP3 resource_errors together);
  - it names only subscribed resources (any, for a wildcard LDS / CDS
    subscription);
  - RDS / EDS: a resource is not sent again unchanged (unless it was
    unsubscribed and subscribed again since);
  - a version the client NACKed is not sent again for that type while the
    subscription stays the same.
"""

import threading

FULL_STATE_TYPES = {
    "type.googleapis.com/envoy.config.listener.v3.Listener",
    "type.googleapis.com/envoy.config.cluster.v3.Cluster",
}


def resource_name(value):
    """Field 1 (name; cluster_name for a ClusterLoadAssignment) of a
    serialized Listener, RouteConfiguration, Cluster or ClusterLoadAssignment."""
    i = 0

    def varint():
        nonlocal i
        shift = result = 0
        while True:
            byte = value[i]
            i += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return result

    while i < len(value):
        tag = varint()
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            varint()
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            length = varint()
            if field == 1:
                return value[i:i + length].decode("utf-8", "replace")
            i += length
        else:
            return None
    return ""


class SotwResponseChecker:
    def __init__(self):
        self._lock = threading.Lock()
        self._nonces = set()
        # type_url -> state
        self._types = {}

    def _state(self, type_url):
        return self._types.setdefault(type_url, {
            "requested": False, "wildcard": False, "names": set(),
            "delivered": {},  # name -> bytes last received
            "nacked_version": None,
        })

    def on_request(self, request):
        with self._lock:
            state = self._state(request.type_url)
            names = set(request.resource_names)
            first = not state["requested"]
            state["requested"] = True
            wildcard = request.type_url in FULL_STATE_TYPES and (
                "*" in names or (not names and (first or state["wildcard"])))
            names.discard("*")
            if names != state["names"] or wildcard != state["wildcard"]:
                state["nacked_version"] = None  # a new subscription may be answered
            for gone in state["names"] - names:
                state["delivered"].pop(gone, None)
            state["names"], state["wildcard"] = names, wildcard
            if request.HasField("error_detail"):
                state["nacked_version"] = state.get("last_version")

    def on_response(self, response):
        """The rules `response` breaks, as messages."""
        with self._lock:
            violations = []
            type_url = response.type_url
            if not response.version_info:
                violations.append(f"{type_url}: empty version_info")
            if not response.nonce:
                violations.append(f"{type_url}: empty nonce")
            elif response.nonce in self._nonces:
                violations.append(f"{type_url}: nonce {response.nonce!r} used twice")
            self._nonces.add(response.nonce)
            if type_url not in self._types:
                return violations + [f"{type_url}: never requested"]
            state = self._types[type_url]
            if state["nacked_version"] is not None and response.version_info == state["nacked_version"]:
                violations.append(f"{type_url}: NACKed version {response.version_info!r} sent again")
            seen = set()

            def check_name(name):
                if name in seen:
                    violations.append(f"{type_url}: {name!r} twice in one response")
                seen.add(name)
                if not state["wildcard"] and name not in state["names"]:
                    violations.append(f"{type_url}: {name!r} was not subscribed")

            for any_message in response.resources:
                if any_message.type_url != type_url:
                    violations.append(f"{type_url}: a resource of type {any_message.type_url}")
                    continue
                name = resource_name(any_message.value)
                if name is None:
                    violations.append(f"{type_url}: a resource that does not parse")
                    continue
                check_name(name)
                if (type_url not in FULL_STATE_TYPES
                        and state["delivered"].get(name) == any_message.value):
                    violations.append(f"{type_url}: {name!r} sent again unchanged")
                state["delivered"][name] = any_message.value
            for error in response.resource_errors:
                check_name(error.resource_name.name)
                state["delivered"].pop(error.resource_name.name, None)
            state["last_version"] = response.version_info
            return violations
