"""Labs: the topology model, the ``Lab`` protocol every runtime answers (live namespaces,
containerlab, virtual time), the runtimes that deploy a topology, and the state they leave."""
