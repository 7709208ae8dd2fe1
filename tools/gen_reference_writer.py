"""gen_reference_writer.py -- the safetensors writer of tools/gen_reference.py (and of the tools
that import it from there: torch_interop.py, torch_freeze.py, gen_zoo_reference.py): float32 and
int64 tensors and string metadata, in insertion order, the data section 8-byte aligned."""

import json
import struct

import torch


class SafetensorsWriter:
    """Collects tensors and string metadata; write() lays them out in insertion order."""

    def __init__(self):
        self.tensors = []   # (name, dtype, shape, bytes)
        self.names = set()
        self.meta = {}

    def add(self, name, t):
        assert name not in self.names, name
        self.names.add(name)
        t = t.detach().contiguous().cpu()
        if t.dtype == torch.float32:
            dtype, np_type = "F32", "<f4"
        elif t.dtype == torch.int64:
            dtype, np_type = "I64", "<i8"
        else:
            raise TypeError(f"{name}: unsupported dtype {t.dtype}")
        self.tensors.append((name, dtype, list(t.shape), t.numpy().astype(np_type).tobytes()))

    def write(self, path):
        header = {}
        offset = 0
        for name, dtype, shape, data in self.tensors:
            header[name] = {"dtype": dtype, "shape": shape,
                            "data_offsets": [offset, offset + len(data)]}
            offset += len(data)
        header["__metadata__"] = self.meta
        text = json.dumps(header, separators=(",", ":")).encode("utf-8")
        # Pad with spaces so the data section starts 8-byte aligned.
        text += b" " * ((8 - len(text) % 8) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for _, _, _, data in self.tensors:
                f.write(data)
        return 8 + len(text) + offset
