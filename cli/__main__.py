"""``python -m rocelab.cli``: the console script without installing it."""
from .program import program

program.run()
