"""Fitting the core's costs to measurements, and checking the fit.

``calibrate`` fits a profile's free parameters to published tables (``published`` in the
core reads them) or to the user's own runs (``calibrate_runs``, ``calibrate_sim``);
``calibrate_studies`` refits leaving one study out; ``coverage`` and ``checks`` measure how
often the ranges hold.  It stands on the core and never on sweeps.
"""
