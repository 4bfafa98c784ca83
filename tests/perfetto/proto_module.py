"""Compiles one of this directory's .proto files with protoc into a temporary
directory (removed at exit) and imports the generated module: the decoders here
read files with protobuf's own reader, against definitions written from the
formats' published field numbers."""
import atexit
import importlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def load(proto):
    out = tempfile.mkdtemp(prefix="tw-proto-")
    atexit.register(shutil.rmtree, out, True)
    subprocess.run(["protoc", f"-I{HERE}", f"--python_out={out}", os.path.join(HERE, proto)], check=True)
    sys.path.insert(0, out)
    return importlib.import_module(proto.replace(".proto", "_pb2"))
