"""The emulated lossless switch.

``config_load`` turns a SONiC config_db.json into the typed configuration of ``config``,
``model`` is the pure data plane built from it (time is an argument, no sockets, threads or
clock reads), and the agent is the I/O shell that feeds the model frames from AF_PACKET ports.
"""
