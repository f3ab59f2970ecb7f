"""Projections of storage transports onto real hardware.

``transports`` and ``wire`` say what one I/O puts on the wire (pure protocol
facts); ``profiles`` describe hardware and software costs; ``network`` turns
both into the service demands of a closed queueing network; ``simulate`` runs
it in SimPy; ``mva`` solves it analytically for calibration; ``project`` and
``report`` turn scenarios into records and tables.
"""
