"""Generates and imports Python protobuf / grpcio stubs at run time.

Peers (grpc_test_server.py, grpc_test_client.py, the fake control plane)
call load() once at start-up. It runs protoc with the system
grpc_python_plugin into a fresh temporary folder, imports the generated
modules and removes the folder again, so a script needs nothing from the
build directory and works the same from a test, a bench or a shell.

Why not import the generated code as protoc lays it out: code generated from
grpc/testing/*.proto forms a top-level `grpc` package that would shadow
grpcio's own `grpc` package. So the generated tree is placed under a private
package root (e.g. `_uxds_protos_1.grpc.testing.test_pb2`) and every import
between generated modules is rewritten to go through that root. Imports of
modules protoc did not generate here (google.protobuf well-known types,
grpcio's `import grpc`) are left alone.

Only /usr/bin/python3 has Debian's grpcio; run the peers with it.
"""

import importlib
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2

PROTOC = os.environ.get("UXDS_PROTOC", "protoc")
GRPC_PYTHON_PLUGIN = os.environ.get("UXDS_GRPC_PYTHON_PLUGIN", "/usr/bin/grpc_python_plugin")
GRPC_PROTO_DIR = "/usr/share/grpc-proto"
# Debian's libprotobuf-dev: google/protobuf/*.proto, needed by protoc to
# resolve well-known-type imports (their Python modules ship with protobuf).
PROTOBUF_INCLUDE_DIR = "/usr/include"

_root_counter = itertools.count(1)
# Lines protoc's Python generators use to import another generated module:
#   from grpc.testing import empty_pb2 as grpc_dot_testing_dot_empty__pb2
#   import foo_pb2 as foo__pb2        (a .proto at the top of a proto path)
_FROM_IMPORT = re.compile(r"^from ([\w.]+) import (\w+)( as \w+)?$")
_PLAIN_IMPORT = re.compile(r"^import (\w+)( as \w+)?$")


class ProtoLoadError(RuntimeError):
    pass


class ProtoModules:
    """The modules generated for one load() call, by .proto file name."""

    def __init__(self, root, messages, services):
        self.root = root
        self._messages = messages
        self._services = services

    def messages(self, proto_file):
        """The `_pb2` module of e.g. 'grpc/testing/messages.proto'."""
        try:
            return self._messages[proto_file]
        except KeyError:
            raise ProtoLoadError(f"{proto_file}: not loaded (loaded: {sorted(self._messages)})")

    def services(self, proto_file):
        """The `_pb2_grpc` module (stubs, servicers) of e.g. 'grpc/testing/test.proto'."""
        try:
            return self._services[proto_file]
        except KeyError:
            raise ProtoLoadError(f"{proto_file}: no grpc stubs loaded (loaded: {sorted(self._services)})")


def _module_name(proto_file, suffix):
    return proto_file[: -len(".proto")].replace("/", ".").replace("-", "_") + suffix


def _run_protoc(args):
    result = subprocess.run([PROTOC] + args, capture_output=True, text=True)
    if result.returncode != 0:
        raise ProtoLoadError(f"protoc {' '.join(args)} failed:\n{result.stderr}")


def _transitive_files(protos, include_args, workdir):
    """Every .proto the given ones import, directly or not, in dependency order."""
    descriptor_set = os.path.join(workdir, "descriptor_set.pb")
    _run_protoc(include_args + ["--include_imports", "--descriptor_set_out=" + descriptor_set] + list(protos))
    files = descriptor_pb2.FileDescriptorSet()
    with open(descriptor_set, "rb") as f:
        files.ParseFromString(f.read())
    return [fd.name for fd in files.file]


def _rewrite_imports(path, root, generated_modules):
    with open(path) as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        m = _FROM_IMPORT.match(line)
        if m and f"{m.group(1)}.{m.group(2)}" in generated_modules:
            lines[i] = f"from {root}.{m.group(1)} import {m.group(2)}{m.group(3) or ''}"
            continue
        m = _PLAIN_IMPORT.match(line)
        if m and m.group(1) in generated_modules:
            lines[i] = f"from {root} import {m.group(1)}{m.group(2) or ''}"
    with open(path, "w") as f:
        f.write("\n".join(lines))


def load(protos, proto_paths=(GRPC_PROTO_DIR,), grpc_services=True):
    """Generates and imports stubs for `protos` and everything they import.

    protos: .proto names relative to one of proto_paths, e.g.
      ['grpc/testing/test.proto'].
    proto_paths: folders protoc searches (--proto_path); the protobuf
      well-known types folder is appended.
    grpc_services: also generate `_pb2_grpc` modules (service stubs).

    A .proto registers itself in protobuf's default descriptor pool when
    imported, so load each file once per process (one load() call with every
    file a script needs).
    """
    include_args = [f"--proto_path={p}" for p in list(proto_paths) + [PROTOBUF_INCLUDE_DIR]]
    root = f"_uxds_protos_{os.getpid()}_{next(_root_counter)}"
    workdir = tempfile.mkdtemp(prefix="uxds-protoload-")
    try:
        # Well-known types come with the protobuf package: generating them
        # again would register google/protobuf/*.proto twice.
        files = [
            f for f in _transitive_files(protos, include_args, workdir) if not f.startswith("google/protobuf/")
        ]
        out = os.path.join(workdir, root)
        os.mkdir(out)
        args = include_args + [f"--python_out={out}"]
        if grpc_services:
            args += [
                f"--plugin=protoc-gen-grpc_python={GRPC_PYTHON_PLUGIN}",
                f"--grpc_python_out={out}",
            ]
        _run_protoc(args + files)

        generated = {_module_name(f, "_pb2") for f in files}
        for dirpath, _, names in os.walk(out):
            for name in names:
                if name.endswith(".py"):
                    _rewrite_imports(os.path.join(dirpath, name), root, generated)

        # Imported as namespace packages (no __init__.py) from workdir, which
        # is on sys.path only while importing; the modules stay in memory.
        sys.path.insert(0, workdir)
        try:
            importlib.invalidate_caches()
            messages = {f: importlib.import_module(f"{root}.{_module_name(f, '_pb2')}") for f in files}
            services = {}
            if grpc_services:
                services = {f: importlib.import_module(f"{root}.{_module_name(f, '_pb2_grpc')}") for f in files}
        finally:
            sys.path.remove(workdir)
        return ProtoModules(root, messages, services)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def load_grpc_testing():
    """grpc.testing messages and TestService stubs, as (messages_pb2, empty_pb2, test_pb2_grpc)."""
    modules = load(
        [
            "grpc/testing/empty.proto",
            "grpc/testing/messages.proto",
            "grpc/testing/test.proto",
        ]
    )
    return (
        modules.messages("grpc/testing/messages.proto"),
        modules.messages("grpc/testing/empty.proto"),
        modules.services("grpc/testing/test.proto"),
    )
