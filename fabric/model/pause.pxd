# Types for the compiled build (compiled.py): Cython compiles pause.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cdef class PauseState:
    cdef public double quantum_s
    cdef public list pfc_rx
    cdef public long long pause_rx
    cdef public list last_pfc_rx, ends, _since, _paused_s, _ignored, _pfc_enabled

cdef class PfcSender:
    cdef public object priorities, quanta, refresh_s, next_refresh
    cdef public bint xoff
