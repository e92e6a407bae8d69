"""htsim (Broadcom/csg-htsim, C++) as the bench's yardstick: ``build.sh`` compiles a source
checkout the user provides; ``adapter`` writes a case as its connection matrix, runs
``htsim_roce`` and reads what it prints."""
