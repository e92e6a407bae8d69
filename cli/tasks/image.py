"""``image.*``: the container images ``--runtime containerlab`` deploys."""
from __future__ import annotations

from invoke import Collection, task

from .common import USER_ERRORS, console, fail


@task(help={"engine": "container engine CLI: docker (default) or podman",
            "mirror": "Debian mirror for the base image (default: the one apt uses here)"})
def build_images(c, engine="docker", mirror=""):
    """Build rocelab-switch and rocelab-host, the images --runtime containerlab deploys, on a
    base built from Debian packages (no image registry needed; docs/containerlab.md)."""
    from ...labs import images
    try:
        built = images.build_images(
            engine, mirror=mirror or None,
            say=lambda line: console.print(f"image.build: {line}", markup=False, soft_wrap=True))
    except USER_ERRORS as e:
        raise fail(e) from None
    console.print("built: " + ", ".join(built))



ns = Collection("image")
ns.add_task(build_images, name="build")
