# Types for the compiled build (compiled.py): Cython compiles counters.py, unchanged, with
# these declarations; the pure-Python module ignores this file.
cdef class _Dispositions:
    cdef public long long forwarded, to_cpu, held, flow_control
    cdef public dict drops

cdef class PortCounters(_Dispositions):
    cdef public long long unclassified_packets, unclassified_bytes
    # C arrays of NUM_PGS and NUM_QUEUES (8): a new list when read from Python
    cdef public long long pg_rx_packets[8]
    cdef public long long pg_rx_bytes[8]
    cdef public long long queue_tx_packets[8]
    cdef public long long queue_tx_bytes[8]
