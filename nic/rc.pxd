# Types for the compiled build (compiled.py): Cython compiles rc.py, unchanged, with
# these declarations; the pure-Python module ignores this file. A dataclass's fields are
# declared in its own order: Cython builds its __init__ from them.
cimport cython

@cython.locals(modulo=cython.longlong)
cpdef long long psn_add(long long psn, long long n)
@cython.locals(modulo=cython.longlong)
cpdef long long psn_diff(long long a, long long b)

cdef class Segment:
    cdef readonly long long psn, opcode, payload
    cdef readonly bint ackreq
    cdef readonly long long message, offset, message_bytes
    cdef readonly bint retransmit

cdef class RequesterStats:
    cdef public long long packets_sent, bytes_sent, retransmitted, naks_received, timeouts
    cdef public long long acks_received, messages_done, bytes_acked
    cdef public list completion_s

cdef class Requester:
    cdef public long long size, count, mtu, window, retry_limit, start_psn, per_message
    cdef public long long total, posted, una, nxt, sent_high, retries
    cdef public object op, rto_s, deadline, failed
    cdef public dict first_sent
    cdef public tuple opcodes
    cdef public RequesterStats stats
    # called per frame by the NIC (nic/core.pxd)
    cpdef post(self, messages)
    cpdef long long psn_of(self, long long index)
    cpdef long long index_of(self, long long psn)
    cpdef bint can_send(self)
    cpdef bint is_done(self)
    @cython.locals(index=cython.longlong, message=cython.longlong, part_index=cython.longlong,
                   offset=cython.longlong, payload=cython.longlong, last=cython.bint,
                   retransmit=cython.bint, part=Py_ssize_t, ackreq=cython.bint,
                   segment=Segment)
    cpdef next_segment(self, double now)
    cpdef on_ack(self, long long psn, double now)
    cpdef on_nak(self, long long psn, double now)
    cpdef bint poll(self, double now)
    cpdef _acknowledge(self, long long upto, double now)

cdef class ResponderStats:
    cdef public long long packets, bytes, messages, duplicates, out_of_sequence, acks_sent
    cdef public long long naks_sent

cdef class Reply:
    cdef readonly object kind
    cdef readonly long long psn, msn

cdef class Responder:
    cdef public long long epsn, ack_every, unacked
    cdef public object ack_delay_s, unacked_since
    cdef public ResponderStats stats
    cdef public bint nak_sent
    @cython.locals(ahead=cython.longlong)
    cpdef on_packet(self, long long psn, long long opcode, long long payload, bint ackreq,
                    double now=*)
    cpdef next_timer(self)
    cpdef poll(self, double now)
    cpdef _reply(self, kind, long long psn)
