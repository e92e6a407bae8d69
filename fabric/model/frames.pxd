# Types for the compiled build (compiled.py): Cython compiles frames.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.string cimport memcpy

cpdef long long checksum_adjust(long long checksum, long long old_word, long long new_word)
@cython.locals(total=cython.longlong)
cpdef bytes ttl_decrement(long long checksum, int ttl, int proto)
cpdef bytes bytes_at(bytes frame, Py_ssize_t start, Py_ssize_t n)
cpdef bytes routed_ipv4(bytes head, bytes frame, Py_ssize_t off, Py_ssize_t total)
