# Types for the compiled amqp10.frames (Cython pure-Python mode; scripts/build_speedups.py).
# frames.py stays the pure path and the reference: nothing here changes what it does.
import cython


@cython.locals(out=bytearray, value=object)
cpdef bytes encode_transfer_frame(
    object channel,
    object handle,
    object delivery_id,
    object delivery_tag,
    object message_format,
    object settled,
    object payload,
)


cdef object _frame(
    object frame_type,
    object channel,
    object performative,
    object payload,
    object extended,
    object size,
    object raw,
)


@cython.locals(body_start=Py_ssize_t, end=Py_ssize_t, extended=bytes, payload=bytes)
cpdef _frame_from(bytes raw, Py_ssize_t size, Py_ssize_t doff, int frame_type, int channel)


cdef class FrameDecoder:
    cdef bytearray _buffer
    cdef Py_ssize_t _pos
    cdef bint _expect_header
    cdef public object max_frame_size
    cdef public object offset

    @cython.locals(buffer=bytearray, base=Py_ssize_t, available=Py_ssize_t, raw=bytes)
    cpdef next_item(self)

    @cython.locals(count=Py_ssize_t)
    cpdef _consume(self, Py_ssize_t count)
