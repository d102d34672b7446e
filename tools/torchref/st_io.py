"""Hand-written safetensors reader and writer (float32 only).

File layout (https://github.com/huggingface/safetensors, "Format"):

    8 bytes   little-endian uint64 N: length of the JSON header in bytes
    N bytes   UTF-8 JSON object:
                {"__metadata__": {str: str, ...},            (optional)
                 "<name>": {"dtype": "F32", "shape": [...],
                            "data_offsets": [begin, end]}, ...}
              padded with trailing spaces so that 8 + N is a multiple of 8
    rest      raw little-endian tensor data; data_offsets are relative to
              the first byte after the header, end exclusive

gotron writes the tensors in sorted-name order, contiguous, with no gaps, and
sorts the header keys the same way. The reader below checks all of that.
"""

import json
import struct
import sys
from array import array

import torch

_HEADER_ALIGN = 8


def _to_le_bytes(t):
    """Return the raw little-endian float32 bytes of tensor t (any shape)."""
    a = array("f", t.detach().to(torch.float32).contiguous().reshape(-1).tolist())
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


def _from_le_bytes(buf, shape):
    """Return a float32 tensor of the given shape read from little-endian bytes."""
    a = array("f")
    a.frombytes(buf)
    if sys.byteorder != "little":
        a.byteswap()
    return torch.tensor(a.tolist(), dtype=torch.float32).reshape(shape)


def save(path, tensors, metadata=None):
    """Write {name: float32 tensor} to path as safetensors, sorted by name."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        t = tensors[name]
        data = _to_le_bytes(t)
        header[name] = {
            "dtype": "F32",
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    pad = (-(8 + len(text))) % _HEADER_ALIGN
    text += b" " * pad
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def load(path):
    """Read a float32 safetensors file; return ({name: tensor}, metadata dict).

    Raises ValueError naming the file and the field when the file breaks the
    format or gotron's conventions (F32 only, sorted contiguous data).
    """
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: {len(raw)} bytes, shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} runs past the end of the {len(raw)}-byte file")
    header = json.loads(raw[8 : 8 + n].decode("utf-8"))
    data = raw[8 + n :]
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    expect = 0
    for name in sorted(header):
        info = header[name]
        if info.get("dtype") != "F32":
            raise ValueError(f"{path}: tensor {name!r} has dtype {info.get('dtype')!r}, want 'F32'")
        shape = [int(d) for d in info["shape"]]
        begin, end = (int(x) for x in info["data_offsets"])
        numel = 1
        for d in shape:
            numel *= d
        if begin != expect:
            raise ValueError(
                f"{path}: tensor {name!r} starts at byte {begin}, want {expect} "
                "(data must be contiguous in sorted-name order)"
            )
        if end - begin != 4 * numel:
            raise ValueError(
                f"{path}: tensor {name!r} spans {end - begin} bytes, want 4*{numel} for shape {shape}"
            )
        if end > len(data):
            raise ValueError(f"{path}: tensor {name!r} ends at {end}, past the {len(data)} data bytes")
        tensors[name] = _from_le_bytes(data[begin:end], shape)
        expect = end
    if expect != len(data):
        raise ValueError(f"{path}: {len(data) - expect} trailing data bytes after the last tensor")
    return tensors, metadata
