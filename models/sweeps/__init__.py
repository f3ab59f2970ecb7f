"""Design-space sweeps: many projected points, locally or on a Dask cluster.

``sweep`` expands a sweep file into points of the core's projection, ``sweep_goals``
judges them against the user's goals, and ``sweep_run`` runs them with progress and a
resumable output.  It stands on the core and never on calibration.
"""
