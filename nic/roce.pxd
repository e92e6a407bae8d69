# Types for the compiled build (compiled.py): Cython compiles roce.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cimport cython
cpdef _l2_header(frame)
cpdef mac_control(frame)
cpdef bth_crc(bytes bth, crc)
cpdef _mask_ip(bytearray hdr, bint ipv4)
@cython.locals(hdr=bytearray, size=Py_ssize_t)
cpdef v2_headers_crc(bytes ip_udp, bint ipv4)
