"""Runtimes deploy a Topology: ``netns`` (default, embedded) and ``containerlab``."""
