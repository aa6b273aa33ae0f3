#!/usr/bin/env python3
"""Turns table-driven resource test cases written as proto3 JSON into bytes.

Run at build time (tests/xds/resources/meson.build) with /usr/bin/python3,
whose protobuf package parses proto3 JSON through a descriptor set made by
protoc from uxds's own trimmed protos. The test binaries link protobuf-lite
only (through uxds) and cannot do this themselves.

  json_to_proto.py CASES.json DESCRIPTORS.pb OUT.pack.json CORPUS_DIR SEEDS.txt

CASES.json:
  {"type": "envoy.config.cluster.v3.Cluster",
   "cases": [{"name": "eds", "resource": {...proto3 JSON...}, "expect": {...}},
             {"name": "bad", "resource": {...}, "error": "exact status message"},
             {"name": "garbage", "raw_hex": "ff", "error": "..."}]}
OUT.pack.json: the same cases with the resource as "hex" bytes.
CORPUS_DIR: one file per case with the bytes: the fuzzers' seed corpus.
SEEDS.txt: the absolute paths of those files, comma-separated (libFuzzer's
  -seed_inputs=@SEEDS.txt, which reads them without writing to the folder).
"""

import json
import os
import shutil
import sys

from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import json_format
from google.protobuf import message_factory


def load_pool(descriptor_set_path):
    with open(descriptor_set_path, "rb") as f:
        files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for file_proto in files.file:
        pool.Add(file_proto)
    return pool


def message_class(pool, full_name):
    descriptor = pool.FindMessageTypeByName(full_name)
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


def main(argv):
    if len(argv) != 6:
        sys.exit(__doc__)
    cases_path, descriptors_path, out_path, corpus_dir, seeds_path = argv[1:]
    with open(cases_path) as f:
        table = json.load(f)
    pool = load_pool(descriptors_path)
    cls = message_class(pool, table["type"])
    shutil.rmtree(corpus_dir, ignore_errors=True)
    os.makedirs(corpus_dir)
    names = set()
    packed = []
    seed_files = []
    for case in table["cases"]:
        name = case["name"]
        if name in names:
            sys.exit(f"{cases_path}: duplicate case name {name}")
        names.add(name)
        if ("error" in case) == ("expect" in case):
            sys.exit(f"{cases_path}: case {name} needs exactly one of error / expect")
        if "raw_hex" in case:
            data = bytes.fromhex(case["raw_hex"])
        else:
            message = cls()
            try:
                json_format.Parse(json.dumps(case["resource"]), message, descriptor_pool=pool)
            except json_format.ParseError as e:
                sys.exit(f"{cases_path}: case {name}: {e}")
            data = message.SerializeToString()
        out = {"name": name, "hex": data.hex()}
        for key in ("error", "expect", "resource_name"):
            if key in case:
                out[key] = case[key]
        packed.append(out)
        seed_file = os.path.abspath(os.path.join(corpus_dir, name))
        with open(seed_file, "wb") as f:
            f.write(data)
        seed_files.append(seed_file)
    with open(out_path, "w") as f:
        json.dump({"type": table["type"], "cases": packed}, f, indent=1)
    with open(seeds_path, "w") as f:
        f.write(",".join(seed_files))


if __name__ == "__main__":
    main(sys.argv)
