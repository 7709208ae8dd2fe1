#!/usr/bin/python3
"""poison_checkpoint.py IN OUT TENSOR INDEX nan|inf -- copies a dtnn checkpoint (safetensors)
with one float32 value of TENSOR set to NaN or +Inf and the file's CRC-32C (metadata "crc32c",
computed as src/io/safetensors.c does: the 8-byte length, the header with the value's eight
digits as zeros, the data) recomputed, so that the file is intact as a file and only its
numbers are bad: what a diverged run saved by another tool would look like."""
import json
import struct
import sys


def crc32c(data, crc=0):
    table = crc32c.table
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


crc32c.table = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    crc32c.table.append(c)


def main():
    src, dst, name, index, kind = sys.argv[1:6]
    blob = bytearray(open(src, "rb").read())
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    start, end = header[name]["data_offsets"]
    at = 8 + n + start + 4 * int(index)
    if header[name]["dtype"] != "F32" or at + 4 > 8 + n + end:
        sys.exit(f"{name}[{index}] is not a float32 value of {src}")
    blob[at:at + 4] = struct.pack("<I", 0x7FC00000 if kind == "nan" else 0x7F800000)
    text = blob[8:8 + n].decode()
    field = '"crc32c":"'
    digits = text.index(field) + len(field)
    zeroed = blob[:8] + text[:digits].encode() + b"00000000" + text[digits + 8:].encode()
    value = crc32c(bytes(zeroed) + bytes(blob[8 + n:]))
    blob[8 + digits:8 + digits + 8] = f"{value:08x}".encode()
    open(dst, "wb").write(blob)


if __name__ == "__main__":
    main()
