"""The virtual-time runtime's parts: an event engine, wires that serialise and delay, and
the node shells that drive the unchanged switch model and NIC core in simulated time.

``labs.runtimes.sim`` builds a lab from them; nothing here knows a lab's shape."""
