# Types for the compiled build (compiled.py): Cython compiles frames.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cimport cython

cpdef long long checksum_adjust(long long checksum, long long old_word, long long new_word)
@cython.locals(total=cython.longlong)
cpdef bytes ttl_decrement(long long checksum, int ttl, int proto)
