# Types for the compiled build (compiled.py): Cython compiles codec.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cimport cython
from rocelab.nic.roce cimport bth_crc

cdef class Incoming:
    cdef readonly bytes src_ip
    cdef readonly long long ecn, opcode, dqpn, psn
    cdef readonly bint ackreq
    cdef readonly long long payload
    cdef readonly object aeth

cdef class Headers:
    cdef public bint ipv6
    cdef public bytes eth, src, dst
    cdef public long long tos, sport, ttl
    cdef public dict _by_length, _crc_by_length
    cpdef icrc_seed(self, Py_ssize_t length)
    cpdef bytes for_transport(self, Py_ssize_t length)

cpdef bytes _zeros(Py_ssize_t n)
cdef list _ZERO_RUN_TABLES, _ZERO_RUN_CONSTANTS
cpdef unsigned int crc32_zeros(Py_ssize_t n, unsigned int crc)
@cython.locals(pad=Py_ssize_t, transport_len=Py_ssize_t)
cpdef bytes _frame(Headers headers, long long opcode, long long dqpn, long long psn, bytes ext,
                   Py_ssize_t payload, long long ackreq, long long becn)
@cython.locals(total=Py_ssize_t)
cpdef parse(bytes frame)
cpdef _parse6(bytes frame)
@cython.locals(opcode=int, flags=int, qp_word=cython.longlong, psn_word=cython.longlong,
               ext=Py_ssize_t, payload=Py_ssize_t)
cpdef _transport(bytes frame, Py_ssize_t bth_at, Py_ssize_t udp_len, bytes src_ip, long long ecn)
