"""What a run leaves behind: its records and the folder that holds them.

``records.py`` is a result record (one point of a run or a projection) and
the run's journal; ``outdir.py`` is the output folder every file of a run
is written into through its manifest, so sanlab only ever removes or
overwrites what it wrote.  Runs (targets/), projections and sweeps
(models/) write them; reports read them.
"""
