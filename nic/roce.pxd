# Types for the compiled build (compiled.py): Cython compiles roce.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cpdef _l2_header(frame)
cpdef mac_control(frame)
cpdef bth_crc(bytes bth, crc)
