# Types for the compiled build (compiled.py): Cython compiles router6.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
from rocelab.fabric.model.router_base cimport RouterBase

cdef class Router6(RouterBase):
    cdef public bint hash_flow_label
