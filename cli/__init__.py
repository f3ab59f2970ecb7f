"""sanlab: a laptop-sized laboratory for block-storage transports.

This top package holds only the command line, which wires the layers
together: ``sanlab.scenarios`` (shared vocabulary) -> ``sanlab.emulator`` ->
``sanlab.targets`` -> ``sanlab.dissectors`` -> ``sanlab.models``.  Nothing in
a layer imports this package.
"""

__version__ = "0.1.0"
