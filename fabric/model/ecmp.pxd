# Types for the compiled build (compiled.py): Cython compiles ecmp.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING

cdef extern from "zlib.h":
    # zlib's own, linked by scripts/compile.py: Python's zlib.crc32 without the call
    unsigned long zlib_crc32 "crc32"(unsigned long crc, const unsigned char *buf,
                                     unsigned int length) nogil

@cython.locals(ihl=Py_ssize_t, proto=int, frag=int, ports=bint, at="unsigned char *",
               crc="unsigned int")
cpdef long long packet_flow_hash(bytes packet, Py_ssize_t offset=*, unsigned int salt=*) except? -1
