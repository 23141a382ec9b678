# Types for the compiled amqp10.message_head (Cython pure-Python mode; scripts/build_speedups.py).
# message_head.py stays the pure path and the reference: nothing here changes what it does.
import cython


@cython.locals(
    data=bytes,
    pos=Py_ssize_t,
    end=Py_ssize_t,
    last_rank=Py_ssize_t,
    last_at=Py_ssize_t,
    delivery_at=Py_ssize_t,
    message_at=Py_ssize_t,
    properties_at=Py_ssize_t,
    rank=Py_ssize_t,
    value_at=Py_ssize_t,
    step=Py_ssize_t,
    steps=tuple,
    ranks=tuple,
)
cpdef object publish_head(object payload)


@cython.locals(code=int, stop=Py_ssize_t, count=Py_ssize_t, first=Py_ssize_t, step=Py_ssize_t)
cpdef object _user_id(object payload, Py_ssize_t at, Py_ssize_t end)  # message_head: any bytes-like
