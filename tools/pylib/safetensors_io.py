"""Minimal reader/writer for the safetensors format (no PyPI `safetensors` needed).

File layout (https://github.com/huggingface/safetensors, "Format"):
  [8 bytes]  N = little-endian u64, size of the JSON header in bytes
  [N bytes]  UTF-8 JSON object: {"__metadata__": {str: str}, name: {"dtype": "BF16",
             "shape": [..], "data_offsets": [begin, end]}, ...}; offsets are relative to
             the start of the data section. Padded with spaces so that the data section
             starts at an 8-byte aligned offset (as the reference writer does).
  [rest]     raw little-endian tensor bytes, row-major, packed back to back.

The writer emits tensors sorted by name and contiguously (the reference validator
requires each tensor to start where the previous one ended and the byte buffer to be
fully covered).

`save_sharded` writes the Hugging Face sharded layout: model-0000i-of-0000n.safetensors
plus model.safetensors.index.json = {"metadata": {"total_size": bytes},
"weight_map": {tensor name: shard file name}}.

torch is needed only for the tensor functions; `encode_header`, `shard_name`, `write_index`
and `read_header` work without it (bench/make_llada8b_shaped.py streams 16 GB of bytes
through them with numpy alone).
"""

import json
import os
import struct
import sys

try:
    import torch
except ImportError:  # header and index helpers still work; tensor functions need torch
    torch = None

if sys.byteorder != "little":  # the format is little-endian; we write native bytes
    raise RuntimeError("safetensors_io assumes a little-endian host")

# safetensors dtype tag -> bytes per element
TAG_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
            "U8": 1, "BOOL": 1}
# safetensors dtype tag -> (torch dtype, bytes per element); empty without torch
_DTYPES = {} if torch is None else {
    "F64": (torch.float64, 8),
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
    "I16": (torch.int16, 2),
    "I8": (torch.int8, 1),
    "U8": (torch.uint8, 1),
    "BOOL": (torch.bool, 1),
}
_TAG_OF = {dt: tag for tag, (dt, _) in _DTYPES.items()}

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


def dtype_tag(dtype):
    """Returns the safetensors tag ("BF16", "F32", ...) for a torch dtype."""
    if dtype not in _TAG_OF:
        raise ValueError(f"dtype {dtype} is not supported by safetensors_io")
    return _TAG_OF[dtype]


def _tensor_bytes(t):
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        # numpy has no bfloat16: reinterpret the bits as int16 (same size, same bytes).
        return t.view(torch.int16).numpy().tobytes()
    if t.dtype == torch.bool:
        return t.to(torch.uint8).numpy().tobytes()
    return t.numpy().tobytes()


def encode_header(entries, metadata=None):
    """Returns the length prefix and JSON header of a safetensors file whose data section
    holds `entries` = [(name, dtype tag, shape)] back to back in the given order (callers
    sort by name, as the reference writer does). The tensor bytes follow, written by the
    caller in the same order: this is what lets a writer stream tensors it never holds."""
    header = {}
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ValueError("safetensors metadata must map str to str")
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, tag, shape in entries:
        if tag not in TAG_SIZE:
            raise ValueError(f"tensor {name!r} has unsupported dtype {tag!r}")
        size = TAG_SIZE[tag]
        for s in shape:
            size *= int(s)
        header[name] = {"dtype": tag, "shape": [int(s) for s in shape],
                        "data_offsets": [offset, offset + size]}
        offset += size
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * ((-(8 + len(head))) % 8)
    return struct.pack("<Q", len(head)) + head


def serialize(tensors, metadata=None):
    """Returns the bytes of a safetensors file holding `tensors` (name -> tensor)."""
    entries = []
    blobs = []
    for name in sorted(tensors):
        t = tensors[name]
        if torch is None or not isinstance(t, torch.Tensor):
            raise TypeError(f"tensor {name!r} is not a torch.Tensor")
        entries.append((name, dtype_tag(t.dtype), list(t.shape)))
        blobs.append(_tensor_bytes(t))
    return encode_header(entries, metadata) + b"".join(blobs)


def save_file(tensors, path, metadata=None):
    """Writes `tensors` (name -> torch.Tensor) to `path` in safetensors format."""
    data = serialize(tensors, metadata)
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def read_header(path):
    """Returns (header dict without __metadata__, metadata dict, data section start)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: file too short for a safetensors header")
        (n,) = struct.unpack("<Q", raw)
        size = os.fstat(f.fileno()).st_size
        if n > size - 8:
            raise ValueError(f"{path}: header length {n} exceeds file size {size}")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: bad safetensors JSON header: {e}") from e
    if not isinstance(header, dict):
        raise ValueError(f"{path}: safetensors header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    return header, metadata, 8 + n


def load_file(path, with_metadata=False):
    """Reads a safetensors file into {name: torch.Tensor} (CPU, own memory).

    With with_metadata=True returns (tensors, metadata).
    """
    header, metadata, start = read_header(path)
    with open(path, "rb") as f:
        f.seek(start)
        buf = bytearray(f.read())
    out = {}
    for name, info in header.items():
        tag = info.get("dtype")
        if tag not in _DTYPES:
            raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {tag!r}")
        dtype, elem = _DTYPES[tag]
        shape = [int(s) for s in info["shape"]]
        begin, end = (int(x) for x in info["data_offsets"])
        count = 1
        for s in shape:
            count *= s
        if not (0 <= begin <= end <= len(buf)) or end - begin != count * elem:
            raise ValueError(f"{path}: tensor {name!r} has bad data_offsets {[begin, end]}")
        if count == 0:
            out[name] = torch.zeros(shape, dtype=dtype)
            continue
        if dtype == torch.bool:
            t = torch.frombuffer(buf, dtype=torch.uint8, count=count, offset=begin).to(torch.bool)
        else:
            t = torch.frombuffer(buf, dtype=dtype, count=count, offset=begin)
        out[name] = t.reshape(shape).clone()
    return (out, metadata) if with_metadata else out


def save_sharded(tensors, out_dir, max_shard_bytes, metadata=None):
    """Writes HF-style shards of at most `max_shard_bytes` each (a tensor larger than the
    limit gets a shard of its own) plus model.safetensors.index.json.

    Tensors are assigned to shards in the dict's iteration order, like transformers'
    shard_checkpoint, so a model's layers naturally straddle shard boundaries.
    Returns the list of shard file names.
    """
    if max_shard_bytes <= 0:
        raise ValueError("max_shard_bytes must be positive")
    os.makedirs(out_dir, exist_ok=True)
    groups = [[]]
    used = 0
    for name, t in tensors.items():
        size = t.numel() * t.element_size()
        if groups[-1] and used + size > max_shard_bytes:
            groups.append([])
            used = 0
        groups[-1].append(name)
        used += size
    n = len(groups)
    weight_map = {}
    files = []
    total = 0
    for i, names in enumerate(groups):
        fname = shard_name(i, n)
        save_file({k: tensors[k] for k in names}, os.path.join(out_dir, fname), metadata)
        files.append(fname)
        for k in names:
            weight_map[k] = fname
            total += tensors[k].numel() * tensors[k].element_size()
    write_index(out_dir, weight_map, total)
    return files


def shard_name(i, n):
    """Hugging Face's name of shard i (0-based) of n: model-0000{i+1}-of-0000{n}.safetensors."""
    return f"model-{i + 1:05d}-of-{n:05d}.safetensors"


def write_index(out_dir, weight_map, total_size):
    """Writes model.safetensors.index.json: {"metadata": {"total_size": bytes},
    "weight_map": {tensor name: shard file name}} with names sorted."""
    index = {"metadata": {"total_size": int(total_size)},
             "weight_map": {k: weight_map[k] for k in sorted(weight_map)}}
    with open(os.path.join(out_dir, INDEX_FILE), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


def load_dir(model_dir):
    """Loads all tensors of a model folder: model.safetensors.index.json if present
    (every tensor resolved through weight_map), otherwise model.safetensors."""
    index_path = os.path.join(model_dir, INDEX_FILE)
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict):
            raise ValueError(f"{index_path}: missing weight_map")
        out = {}
        for fname in sorted(set(weight_map.values())):
            shard = load_file(os.path.join(model_dir, fname))
            for name, t in shard.items():
                if weight_map.get(name) == fname:
                    out[name] = t
        missing = sorted(set(weight_map) - set(out))
        if missing:
            raise ValueError(f"{index_path}: tensors not found in their shards: {missing[:5]}")
        return out
    single = os.path.join(model_dir, SINGLE_FILE)
    if not os.path.exists(single):
        raise FileNotFoundError(f"{model_dir}: neither {INDEX_FILE} nor {SINGLE_FILE} found")
    return load_file(single)
