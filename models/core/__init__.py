"""The model core: what one I/O costs and how a closed network of desks serves it.

Protocol facts (``transports``, ``wire``), hardware and software costs (``profile``,
``cores``, ``priors``, ``pcie``, ``nicmsg``, ``hostcpu``), the queueing network
(``network``, ``stations``, ``elements``) and its two solvers (``simulate`` in SimPy,
``mva`` analytically), the limits and regimes a point sits in, and ``project``/``report``,
which turn a scenario into records and tables.  It imports neither calibration nor
sweeps: both stand on it (an import-linter contract in pyproject.toml).
"""
