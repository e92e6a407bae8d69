# Types for the compiled build (compiled.py): Cython compiles counters.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cdef class _Dispositions:
    cdef public long long forwarded, to_cpu, held, flow_control
    cdef public dict drops

cdef class PortCounters(_Dispositions):
    cdef public long long unclassified_packets, unclassified_bytes
    cdef public list pg_rx_packets, pg_rx_bytes, queue_tx_packets, queue_tx_bytes
