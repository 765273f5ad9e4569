"""Segment memory as arrays, without a copy.

A host segment becomes a NumPy array through ``__array_interface__``: the
array's ``base`` is a small view object that holds the ``Segment``, so the
memory stays valid while the array lives. A GPU segment becomes a
``DeviceArray``, which CUDA libraries take through DLPack
(``torch.from_dlpack``, ``cupy.from_dlpack``) or
``__cuda_array_interface__`` (CuPy, Numba, ``torch.as_tensor``).
"""

from typing import Any, Optional, Tuple

from . import _gaspi

#: DLPack's type codes by NumPy kind.
_DLPACK_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}
#: DLPack's device types.
_DL_CPU, _DL_CUDA = 1, 2


def _dtype(dtype: Any) -> Any:
    """A NumPy dtype from a NumPy dtype, a name, a type or a torch dtype."""
    import numpy as np

    if dtype is None:
        return np.dtype(np.uint8)
    name = str(dtype)
    if name.startswith("torch."):  # torch.float32 -> float32
        dtype = name[len("torch.") :]
    dt = np.dtype(dtype)
    if dt.kind not in _DLPACK_CODES or not dt.isnative or dt.shape:
        raise TypeError(f"dtype {dt}: a native-order number type is needed (int, uint, float, complex, bool)")
    return dt


def _checked_count(size: int, dt: Any, offset: int, count: Optional[int]) -> int:
    if offset < 0 or offset > size:
        raise ValueError(f"offset {offset} lies outside the segment's {size} bytes")
    if count is None:
        count = (size - offset) // dt.itemsize
    if count < 0 or offset + count * dt.itemsize > size:
        raise ValueError(
            f"{count} elements of {dt} from byte {offset} need "
            f"{offset + count * dt.itemsize} bytes; the segment has {size}"
        )
    return count


class _HostView:
    """What NumPy reads the array from; keeps the segment alive."""

    def __init__(self, segment: Any, ptr: int, count: int, typestr: str) -> None:
        self.segment = segment
        self.__array_interface__ = {
            "version": 3,
            "shape": (count,),
            "typestr": typestr,
            "data": (ptr, False),  # writable
        }


class DeviceArray:
    """A GPU segment's memory (or part of it) as a one-dimensional array of
    ``count`` elements of ``dtype``, for CUDA libraries, without a copy::

        t = torch.from_dlpack(seg.array(numpy.float32))   # or cupy.from_dlpack
        c = cupy.asarray(seg.array("float32"))              # __cuda_array_interface__

    The tensor aliases the segment (what peers write appears in it) and
    keeps it alive. Work the runtime queued into the segment is complete
    after ``wait`` on its queue; kernels that wrote into it are complete
    after the stream's synchronisation, as for any CUDA memory.
    """

    def __init__(self, segment: Any, ptr: int, count: int, dtype: Any, device: Optional[int]) -> None:
        self.segment = segment
        self.ptr = ptr
        self.dtype = dtype
        self.shape: Tuple[int] = (count,)
        #: The GPU, or ``None`` for host memory (DLPack's CPU device).
        self.device = device

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def __cuda_array_interface__(self) -> dict:
        if self.device is None:
            raise AttributeError("__cuda_array_interface__: this memory is not on a GPU")
        return {
            "version": 3,
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self.ptr, False),
            "strides": None,
            "stream": None,
        }

    def __dlpack_device__(self) -> Tuple[int, int]:
        if self.device is None:
            return (_DL_CPU, 0)
        return (_DL_CUDA, self.device)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None) -> Any:
        """A DLPack capsule of the memory (never a copy: ``copy=True`` is
        refused). ``stream`` is not waited on: the segment has no pending
        work of its own once its queue was waited for."""
        if copy:
            raise BufferError("a segment's memory is shared as is; DLPack copy=True is not offered")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"the memory is on DLPack device {self.__dlpack_device__()}, not {tuple(dl_device)}")
        dev_type, dev_id = self.__dlpack_device__()
        return _gaspi.dlpack_capsule(
            self,
            self.ptr,
            [self.shape[0]],
            _DLPACK_CODES[self.dtype.kind],
            self.dtype.itemsize * 8,
            dev_type,
            dev_id,
        )

    def __repr__(self) -> str:
        where = "host" if self.device is None else f"GPU {self.device}"
        return f"<gaspi.DeviceArray {self.shape[0]} x {self.dtype} at {self.ptr:#x} on {where}>"


def segment_array(segment: Any, ptr: int, size: int, dtype: Any, offset: int, count: Optional[int], gpu: Optional[int] = None) -> Any:
    """``Segment.array``: a NumPy array for host memory, a ``DeviceArray``
    for GPU memory."""
    dt = _dtype(dtype)
    count = _checked_count(size, dt, offset, count)
    if gpu is None:
        import numpy as np

        return np.asarray(_HostView(segment, ptr + offset, count, dt.str))
    return DeviceArray(segment, ptr + offset, count, dt, gpu)


def device_view(segment: Any, dtype: Any = None, offset: int = 0, count: Optional[int] = None) -> DeviceArray:
    """A ``DeviceArray`` of any segment, host memory included (DLPack's CPU
    device: ``numpy.from_dlpack``, ``torch.from_dlpack`` on the CPU)."""
    dt = _dtype(dtype)
    count = _checked_count(segment.size, dt, offset, count)
    return DeviceArray(segment, segment.ptr + offset, count, dt, segment.gpu)


def reduction_input(send: Any) -> Tuple[bytes, str]:
    """``allreduce``'s input as bytes and a type code (``f8``, ``i4``, ...)."""
    import numpy as np

    a = np.ascontiguousarray(send)
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    return a.tobytes(), f"{a.dtype.kind}{a.dtype.itemsize}"


def reduction_output(data: bytes, send: Any) -> Any:
    """``allreduce``'s result, an array of ``send``'s shape and dtype."""
    import numpy as np

    a = np.asarray(send)
    return np.frombuffer(bytearray(data), dtype=a.dtype.newbyteorder("=")).reshape(a.shape)
