"""The TCP forwarder in front of the fake control plane's grpcio server.

grpcio cannot stop accepting connections while its calls carry on, nor cut a
connection without first sending GOAWAY / RST_STREAM. Clients of the fake
control plane therefore connect here; each connection is relayed byte for
byte (TLS included, it is end to end) to the grpcio server on another
loopback port. Closing the listening socket refuses new connections;
dropping a connection closes both of its sockets at once; freezing the
connections stops relaying their bytes while both sockets stay open (a
peer that hangs, or a path that silently loses everything: a half-open
connection).
"""

import socket
import struct
import threading

RELAY_CHUNK = 64 * 1024


class _Relay:
    """One client connection and its connection to the backend."""

    def __init__(self, client, backend, on_done):
        self.client = client
        self.backend = backend
        self._on_done = on_done
        self._lock = threading.Lock()
        self._pumps_running = 2
        self._stopping = False
        self._frozen = False

    def start(self):
        for source, sink, name in ((self.client, self.backend, "up"), (self.backend, self.client, "down")):
            threading.Thread(target=self._pump, args=(source, sink), name=f"relay-{name}", daemon=True).start()

    def _pump(self, source, sink):
        try:
            while True:
                data = source.recv(RELAY_CHUNK)
                if not data:
                    break
                if self._frozen:
                    continue  # lost on the way, the connection stays up
                sink.sendall(data)
        except OSError:
            pass
        # Either side ending ends the whole connection: HTTP/2 has no use
        # for a half-closed TCP connection.
        self.stop(abort=False)
        with self._lock:
            self._pumps_running -= 1
            last = self._pumps_running == 0
        if last:
            # Only once both pumps are out may the sockets be closed: a
            # closed descriptor number could otherwise be reused under a
            # pump still reading it.
            self.client.close()
            self.backend.close()
            self._on_done(self)

    def freeze(self):
        self._frozen = True

    def stop(self, abort):
        with self._lock:
            if self._stopping:
                return
            self._stopping = True
            if abort:
                # Linger 0: the close that follows resets the connection.
                self.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            for sock in (self.client, self.backend):
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # wakes the pumps blocked on it
                except OSError:
                    pass


class TcpForwarder:
    def __init__(self, host, port, backend_address):
        self.host = host
        self.port = port  # 0 until the first start_listening() picked one
        self.backend_address = backend_address
        self._lock = threading.Lock()
        self._listener = None
        self._accept_thread = None
        self._relays = set()

    def start_listening(self):
        with self._lock:
            if self._listener is not None:
                return
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            listener = socket.socket(family, socket.SOCK_STREAM)
            # Listening again on the same port right after stop_listening().
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.host, self.port))
            listener.listen(128)
            self.port = listener.getsockname()[1]
            self._listener = listener
            self._accept_thread = threading.Thread(
                target=self._accept_loop, args=(listener,), name="accept", daemon=True
            )
            self._accept_thread.start()

    def stop_listening(self):
        with self._lock:
            listener, self._listener = self._listener, None
            accept_thread, self._accept_thread = self._accept_thread, None
        if listener is None:
            return
        try:
            listener.shutdown(socket.SHUT_RDWR)  # wakes accept(); pending connections are reset
        except OSError:
            pass
        # Closed only once accept() has returned (a reused descriptor number
        # must not reach it), and before returning, so that the port is free
        # for start_listening() right away.
        accept_thread.join()
        listener.close()

    def drop_connections(self):
        with self._lock:
            relays = list(self._relays)
        for relay in relays:
            relay.stop(abort=True)
        return len(relays)

    def freeze_connections(self):
        with self._lock:
            relays = list(self._relays)
        for relay in relays:
            relay.freeze()
        return len(relays)

    def _accept_loop(self, listener):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                backend = socket.create_connection(self.backend_address)
            except OSError:
                client.close()
                continue
            for sock in (client, backend):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            relay = _Relay(client, backend, self._forget)
            with self._lock:
                self._relays.add(relay)
            relay.start()

    def _forget(self, relay):
        with self._lock:
            self._relays.discard(relay)
