"""rocelab: the one import name the project installs.

This folder, the repository's root, is the ``rocelab`` package: each top-level folder that
holds code is one of its subpackages, one floor of the house (``fabric``, ``nic``, ``labs``,
``traffic``, ``checks``, ``cli``; docs/architecture.md). pyproject.toml maps the package to
this folder, so an installed rocelab adds nothing to site-packages but ``rocelab``, and the
modules reach each other by relative imports that read the same in a checkout and installed.
"""
if __name__ == "rocelab":  # not when pytest imports this folder under its own name
    from .compiled import install as _install_compiled

    _install_compiled()  # before any other module of the package is imported (compiled.py)
