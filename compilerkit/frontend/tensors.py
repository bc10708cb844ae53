"""ONNX TensorProto -> numpy, decoding `raw_data` as little-endian explicitly.

ONNX defines raw_data as little-endian whatever machine wrote it, so we decode with an explicit
'<' dtype rather than numpy's native order (onnx-mlir issue 2851 is what host-order decoding
costs on big-endian targets). External data is read only from files inside the model's folder.
"""

from __future__ import annotations

import os

import numpy as np
from onnx import TensorProto

from compilerkit.frontend.checks import ModelError, UnsupportedOpError, check_bytes, dtype_name

# ONNX data type -> (little-endian numpy dtype, typed field of TensorProto holding the values).
_DTYPES = {
    TensorProto.FLOAT: ("<f4", "float_data"),
    TensorProto.DOUBLE: ("<f8", "double_data"),
    TensorProto.INT64: ("<i8", "int64_data"),
    TensorProto.INT32: ("<i4", "int32_data"),
    TensorProto.INT8: ("<i1", "int32_data"),
    TensorProto.UINT8: ("<u1", "int32_data"),
    TensorProto.INT16: ("<i2", "int32_data"),
    TensorProto.UINT16: ("<u2", "int32_data"),
    TensorProto.BOOL: ("|b1", "int32_data"),
}


def _external_bytes(t: TensorProto, base_dir: str | None, nbytes: int) -> bytes:
    """Exactly `nbytes` bytes of external data, after checking location, offset and length
    against the file (nothing is read before the sizes agree)."""
    info = {e.key: e.value for e in t.external_data}
    if base_dir is None:
        raise ModelError(f"tensor {t.name!r} uses external data but the model was not loaded "
                         "from a file, so there is no folder to read it from")
    location = info.get("location", "")
    root = os.path.realpath(base_dir)
    path = os.path.realpath(os.path.join(root, location))
    # Refuse anything that escapes the model's folder (absolute paths, '..', symlinks out).
    if os.path.isabs(location) or os.path.commonpath([root, path]) != root:
        raise ModelError(f"tensor {t.name!r}: external data path {location!r} points outside "
                         f"the model folder {root!r}; refused")
    if not os.path.isfile(path):
        raise ModelError(f"tensor {t.name!r}: external data file {location!r} not found")
    fields = {}
    for key in ("offset", "length"):
        if key in info:
            try:
                fields[key] = int(info[key])
            except ValueError:
                raise ModelError(f"tensor {t.name!r}: external data {key} {info[key]!r} is "
                                 "not an integer") from None
            if fields[key] < 0:
                raise ModelError(f"tensor {t.name!r}: external data {key} {fields[key]} is "
                                 "negative")
    offset = fields.get("offset", 0)
    size = os.path.getsize(path)
    # Without a length the data runs to the end of the file (as onnxruntime reads it).
    length = fields.get("length", max(size - offset, 0))
    if length != nbytes:
        raise ModelError(f"tensor {t.name!r}: external data of {length} B in {location!r} "
                         f"does not match its shape {list(t.dims)} ({nbytes} B)")
    if offset + length > size:
        raise ModelError(f"tensor {t.name!r}: external data asks for {length} B at offset "
                         f"{offset} of {location!r}, which holds only {size} B")
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length)


def to_array(t: TensorProto, base_dir: str | None = None, max_bytes: int | None = None
             ) -> np.ndarray:
    """The numpy value of a TensorProto; dims, data size and the compile budget `max_bytes`
    are checked before anything is read or allocated."""
    if t.data_type not in _DTYPES:
        if t.data_type in TensorProto.DataType.values() and t.data_type != TensorProto.UNDEFINED:
            # A valid model compilerkit declines (uint32, float16, string, ...), not a bad one.
            raise UnsupportedOpError(f"tensor {t.name!r}: element type {dtype_name(t.data_type)} "
                                     "is not supported "
                                     "(supported: float, double, int8/16/32/64, uint8/16, bool)")
        raise ModelError(f"tensor {t.name!r}: ONNX element type {t.data_type} is not an ONNX "
                         "element type")
    le_dtype, field = _DTYPES[t.data_type]
    shape = tuple(int(d) for d in t.dims)
    if any(d < 0 for d in shape):
        raise ModelError(f"tensor {t.name!r}: negative dimension in its shape {list(shape)}")
    count = int(np.prod(shape, dtype=object)) if shape else 1
    itemsize = np.dtype(le_dtype).itemsize
    if max_bytes is not None and count * itemsize > max_bytes:
        check_bytes(f"tensor {t.name!r}", shape, itemsize, max_bytes)
    native = np.dtype(le_dtype).newbyteorder("=")
    if t.data_location == TensorProto.EXTERNAL:
        raw = _external_bytes(t, base_dir, count * itemsize)
    elif t.HasField("raw_data"):
        raw = t.raw_data
    else:
        values = getattr(t, field)
        if len(values) != count:
            raise ModelError(f"tensor {t.name!r}: {len(values)} values for shape {shape}")
        return np.array(values, dtype=native).reshape(shape)
    if len(raw) != count * itemsize:
        raise ModelError(f"tensor {t.name!r}: {len(raw)} bytes of data for shape {shape}")
    # Explicit little-endian decode, then to native order for numpy arithmetic.
    return np.frombuffer(raw, dtype=le_dtype).astype(native).reshape(shape)


def sparse_to_dense(sp, base_dir: str | None = None, max_bytes: int | None = None
                    ) -> TensorProto:
    """A SparseTensorProto (a sparse initializer) as the dense TensorProto of the same name:
    `values` at `indices` (NNZ linear indices, or NNZ x rank coordinates), zero elsewhere.
    Shape, budget and every index are checked before the dense array is made."""
    from onnx import numpy_helper

    from compilerkit.frontend.hygiene import text

    name = text(sp.values.name)
    dims = [int(d) for d in sp.dims]
    if any(d < 0 for d in dims):
        raise ModelError(f"sparse initializer {name!r}: negative dimension in its shape {dims}")
    values = to_array(sp.values, base_dir, max_bytes).reshape(-1)
    if max_bytes is not None:
        check_bytes(f"sparse initializer {name!r}", dims, values.dtype.itemsize, max_bytes)
    indices = to_array(sp.indices, base_dir, max_bytes).astype(np.int64, copy=False)
    size = int(np.prod(dims, dtype=object)) if dims else 1
    if indices.ndim == 2 and indices.shape[1] == len(dims) and len(dims) > 1:
        if (indices < 0).any() or (indices >= np.array(dims)).any():
            raise ModelError(f"sparse initializer {name!r}: an index lies outside its shape "
                             f"{dims}")
        indices = np.ravel_multi_index(indices.T, dims)
    indices = indices.reshape(-1)
    if len(indices) != len(values):
        raise ModelError(f"sparse initializer {name!r}: {len(indices)} indices for "
                         f"{len(values)} values")
    if len(indices) and (indices.min() < 0 or indices.max() >= size):
        raise ModelError(f"sparse initializer {name!r}: an index lies outside its shape {dims} "
                         f"({size} elements)")
    dense = np.zeros(size, values.dtype)
    dense[indices] = values
    return numpy_helper.from_array(dense.reshape(dims), sp.values.name)
