# For the compiled build (compiled.py): Cython compiles dcqcn.py, unchanged. Nothing is
# declared: its classes stay Python classes (a reaction point is made by ``__new__``, its
# timers are None, inf or ints), and what the build gains is their methods compiled, called
# several times per data frame when DCQCN is on.
