"""Small pieces the peer scripts share: protobuf wire encoding by hand (for
messages a script builds without generated stubs) and TLS server
credentials read from PEM files."""


def varint(value):
    """Protobuf base-128 varint of a non-negative integer."""
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def length_delimited(field_number, data):
    """A length-delimited field (wire type 2): tag, length, bytes."""
    return varint(field_number << 3 | 2) + varint(len(data)) + data


def server_credentials(cert_path, key_path, client_ca_path=None):
    """grpc server credentials; with client_ca_path, client certificates are
    required and must chain to that CA (mutual TLS)."""
    import grpc  # here, so that scripts using only the wire helpers need no grpcio

    with open(cert_path, "rb") as f:
        cert = f.read()
    with open(key_path, "rb") as f:
        key = f.read()
    client_ca = None
    if client_ca_path:
        with open(client_ca_path, "rb") as f:
            client_ca = f.read()
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )
