#!/usr/bin/env python3
"""Turns proto3 JSON into serialized protobuf bytes, one line at a time.

The uxds tool links protobuf-lite only, which cannot read JSON; it runs this
with /usr/bin/python3 (whose protobuf package can) over a descriptor set made
by protoc from uxds's own trimmed protos.

  json_lines_to_proto.py DESCRIPTORS.pb MESSAGE_TYPE

Each input line is one JSON object; each output line is "ok HEX" (the
serialized message) or "error MESSAGE" (why the JSON is not a MESSAGE_TYPE).
"""

import json
import sys

from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import json_format
from google.protobuf import message_factory


def message_class(descriptor_set_path, full_name):
    with open(descriptor_set_path, "rb") as f:
        files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for file_proto in files.file:
        pool.Add(file_proto)
    descriptor = pool.FindMessageTypeByName(full_name)
    if hasattr(message_factory, "GetMessageClass"):
        return pool, message_factory.GetMessageClass(descriptor)
    return pool, message_factory.MessageFactory(pool).GetPrototype(descriptor)


def convert(pool, cls, line):
    message = cls()
    try:
        json_format.Parse(line, message, descriptor_pool=pool)
    except (json_format.ParseError, json.JSONDecodeError, ValueError) as e:
        return "error " + " ".join(str(e).split())
    return "ok " + message.SerializeToString().hex()


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    pool, cls = message_class(argv[1], argv[2])
    for line in sys.stdin:
        sys.stdout.write(convert(pool, cls, line) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv)
