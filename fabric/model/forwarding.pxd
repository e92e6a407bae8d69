# Types for the compiled build (compiled.py): Cython compiles forwarding.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
from rocelab.fabric.model.bridge cimport VlanBridge
from rocelab.fabric.model.buffers cimport PgBuffer
from rocelab.fabric.model.pools cimport SharedPool
from rocelab.fabric.model.counters cimport PortCounters
from rocelab.fabric.model.egress cimport EgressPort
from rocelab.fabric.model.egress_buffers cimport QueueBuffer
from rocelab.fabric.model.frames cimport bytes_at
from rocelab.fabric.model.ports cimport PortState
from rocelab.fabric.model.router cimport Router
from rocelab.fabric.model.router6 cimport Router6
from rocelab.fabric.model.scheduler cimport PortScheduler

cdef class Charge:
    cdef public PgBuffer buffer
    cdef public long long nbytes, copies

# the state the per-frame path touches (the rest of a switch's is the subclass's own)
cdef class Forwarding:
    cdef public object hostname, _now, _buffers, _charged_cls
    cdef public PgBuffer _charged
    cdef public long long _charged_bytes
    cdef public Router _router
    cdef public Router6 _router6
    cdef public bytes router_mac
    cdef public dict _ports, _backlogged
    cdef public set _moved
    cdef public PortState _touched
    cdef public list _control, _refreshes
    cdef public bint _paced, _refresh_moved, _timers_moved
    cpdef list receive(self, port, frame, now)
    cpdef list receive_on(self, PortState state, frame, now)
    cpdef dequeue(self, port, now)
    cpdef dequeue_on(self, PortState state, now)
    cpdef next_send_time(self, port)
    cpdef double next_send_on(self, PortState state) except? -1
    cpdef PortState port_state(self, port)
    cpdef list backlogged(self)
    cpdef PortState take_touched(self)
    cpdef _touch(self, PortState port)
    cpdef list take_control(self)
    cpdef bint timers_moved(self)
    cdef inline int _mark_moved(self, port) except -1
    cpdef _ingress(self, PortState port, bytes frame, now, list out)
    cpdef _switched_in(self, PortState port, bytes frame, int ethertype, Py_ssize_t off,
                       int vid, int prio, cls, now, list out)
    cpdef _routed_in(self, PortState port, bytes frame, int ethertype, Py_ssize_t off,
                     int vid, int prio, cls, now, list out)
    cpdef _l3_in(self, iface, PortState port, bytes frame, int ethertype, Py_ssize_t off,
                 int prio, cls, list out, now)
    cpdef _mac_control_in(self, PortState port, bytes frame, now)
    cpdef _send_pfc(self, PortState port, quanta, sender)
    cpdef _transmit(self, list out, PgBuffer buffer, long long nbytes, mine, now)
    cpdef _discharge(self, Charge charge, now)
    cpdef _free(self, PgBuffer buffer, long long nbytes, now)
    cpdef _resume(self, pool, now)
    cpdef _release_queued(self, QueueBuffer held, long long nbytes, Charge charge, now)
    cpdef _flush(self, PortState port, queue, now, reason)
