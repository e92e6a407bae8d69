"""The ``rocelab`` command (``program``) and its task collections (``tasks``): the top floor,
the one the repository's ``tasks.py`` also loads."""
