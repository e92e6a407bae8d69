# Types for the compiled build (compiled.py): Cython compiles scheduler.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cimport cython
from rocelab.fabric.model.pause cimport PauseState

cdef class Lateness:
    cdef public long long count
    cdef public double total, max
    cdef public long long[::1] buckets
    @cython.locals(bucket=Py_ssize_t)
    cpdef record(self, double seconds)

cdef class _Entry:
    cdef public bytes frame
    cdef public object meta
    cdef public double at
    cdef public Py_ssize_t size

cdef class _Queue:
    cdef public Py_ssize_t index
    cdef public bint strict
    cdef public long long quantum, deficit, depth, head_size
    cdef public double head_at
    cdef public list entries
    cdef public Py_ssize_t head
    cdef public tuple priorities

cdef class PortScheduler:
    cdef public double rate_bps
    cdef public long long packets
    cdef public double free_at
    cdef public Lateness lateness
    cdef public list depth_peak
    cdef public PauseState pause
    cdef public list queues, _strict, _weighted
    cdef public Py_ssize_t _rr
    cdef public bint _visiting
    cdef public dict _rr_after
    @cython.locals(q=_Queue, peak=cython.longlong)
    cpdef enqueue(self, Py_ssize_t queue, bytes frame, object meta, double now)
    @cython.locals(q=_Queue, peak=cython.longlong)
    cpdef bint start_now(self, Py_ssize_t queue, Py_ssize_t size, double now)
    cpdef double gate(self, Py_ssize_t queue)
    # the pick's helpers are C functions (no Python caller): a weighted pick visits each
    # queue until one is open, a call per visit
    @cython.locals(until=double, priority=Py_ssize_t, ends=list, end=double)
    cdef inline double _held_until(self, _Queue q) except? -1
    cpdef object next_send_time(self)
    @cython.locals(q=_Queue, earliest=double, ready=double, held=double)
    cpdef double next_send_at(self)
    @cython.locals(q=_Queue, start=double, enqueued=double, entry=_Entry, head=_Entry,
                   entries=list, size=Py_ssize_t)
    cpdef object dequeue(self, double now)
    cdef inline bint _open(self, _Queue q, double now) except -1
    @cython.locals(q=_Queue)
    cdef _Queue _pick(self, double now)
    @cython.locals(q=_Queue, size=Py_ssize_t, n=Py_ssize_t, rr=Py_ssize_t, weighted=list,
                   _=Py_ssize_t)
    cdef _Queue _pick_weighted(self, double now)
    cdef inline void _advance(self) noexcept
