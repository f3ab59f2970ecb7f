"""The targets layer: configure real Linux storage stacks on hosts and drive them.

It talks to hosts only through the small interface in ``host`` (run a
command, write or read a file), which the emulator's VMs implement; an SSH
host could implement it too, so the same code can configure real machines.
"""
