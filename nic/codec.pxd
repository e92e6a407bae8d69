# Types for the compiled build (compiled.py): Cython compiles codec.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.string cimport memcpy, memset
from rocelab.fabric.model.frames cimport bytes_at, checksum_adjust
from rocelab.nic.roce cimport bth_crc, v2_headers_crc

cdef extern from "zlib.h":
    # zlib's own, linked by scripts/compile.py: Python's zlib.crc32 without the call
    unsigned long zlib_crc32 "crc32"(unsigned long crc, const unsigned char *buf,
                                     unsigned int length) nogil

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
    cdef public Py_ssize_t _head_length, _seed_length
    cdef public bytes _head
    cdef public unsigned int _seed
    cpdef unsigned int icrc_seed(self, Py_ssize_t length) except? 0
    cpdef bytes for_transport(self, Py_ssize_t length)

@cython.locals(at="unsigned char *", total=Py_ssize_t, new_total=Py_ssize_t,
               udp_length=Py_ssize_t, csum=cython.longlong)
cdef bytes _relength(bytes head, Py_ssize_t length, Py_ssize_t new_length)
cpdef bytes _zeros(Py_ssize_t n)
cdef Py_ssize_t ETH_LEN, BTH_LEN, ICRC_LEN, HEADERS_LEN  # C constants to the per-frame code
cdef Py_ssize_t TOTAL_AT, CHECKSUM_AT, UDP_LENGTH_AT, IPV4_LEN, IP_UDP_LEN
cdef bytes EXTENSION_LEN
cdef unsigned int PKEY_DEFAULT
cdef const unsigned int[::1] _ZERO_RUN_TABLES, _ZERO_RUN_CONSTANTS
cpdef unsigned int crc32_zeros(Py_ssize_t n, unsigned int crc)
@cython.locals(pad=Py_ssize_t, transport_len=Py_ssize_t, head=bytes, seed="unsigned int",
               size=Py_ssize_t, at="unsigned char *", bth="unsigned char *",
               icrc="unsigned char *", qp_word="unsigned int", psn_word="unsigned int",
               crc="unsigned int")
cpdef bytes _frame(Headers headers, long long opcode, long long dqpn, long long psn, bytes ext,
                   Py_ssize_t payload, long long ackreq, long long becn)
# called per frame by the NIC (nic/core.py), in C with positional arguments
cpdef bytes data_frame(Headers headers, long long dqpn, long long psn, long long opcode,
                       Py_ssize_t payload, bint ackreq, reth=*)
cpdef bytes ack_frame(Headers headers, long long dqpn, long long psn, long long msn, bint nak=*)
@cython.locals(total=Py_ssize_t, ethertype=int)
cpdef parse(bytes frame)
cpdef _parse6(bytes frame)
@cython.locals(opcode=int, at=Py_ssize_t, payload=Py_ssize_t, dqpn=cython.longlong,
               psn=cython.longlong, ackreq=cython.bint, incoming=Incoming)
cpdef _transport(bytes frame, Py_ssize_t bth_at, Py_ssize_t udp_len, bytes src_ip, long long ecn)
