"""The host's RoCE NIC, a floor above the switch: its settings file, the pure core (QPs,
reliable connection, DCQCN, pause, pacing) that the live endpoint and the simulator drive,
the frames it builds and reads with struct, and its live shell (``endpoint``)."""
