"""The targets layer: configure real Linux storage stacks on hosts and drive them.

It talks to hosts only through the small interface in ``host`` (run a
command, write or read a file), which the emulator's VMs implement, and so
do real machines over SSH (``emulator.ssh``) and the dry run's imagined
hosts (``dryrun``): the same code configures all three.
"""
