"""The emulator layer: guest images, QEMU VMs, soft-RDMA links, labs.

``images`` builds and caches the guest; ``qemu`` starts one VM and talks to
its agent; ``lab`` brings a scenario's hosts and links up and down.  This
layer knows nothing of storage targets: it offers hosts that run commands.
"""
