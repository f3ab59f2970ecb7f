#!/bin/sh
# mmdebstrap customize hook: runs on the host with the guest tree at $1.
# Compiles siw.ko, installs sanlab's init and agent, keeps only the kernel
# modules the lab needs, and strips what a guest never reads.
set -eu
root=$1
here=$(dirname "$0")
modules_list=$2
build_packages=$3
source=linux-source-$4  # the kernel source siw.ko is compiled from (recipe: kernel_source)
kver=$(ls "$root/lib/modules" | head -n 1)
echo "sanlab: guest kernel $kver"
# Remember what the guest has, so the build tools can leave without a trace.
before=$(mktemp)
chroot "$root" dpkg-query -W -f '${Package}\n' | sort > "$before"
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  $build_packages >/dev/null
echo "sanlab: installed build tools ($build_packages)"

# --- siw.ko from Debian's linux-source, against the matching headers -------
# With one patch: siw closes its connections abortively, as the kernel's
# TCP storage drivers do (see the patch's comment and vm-images/README.md).
cp "$here/siw-abortive-close.patch" "$root/tmp/siw-abortive-close.patch"
chroot "$root" sh -ec "
  cd /tmp
  tar -xaf /usr/src/$source.tar.xz $source/drivers/infiniband/sw/siw
  patch -s -d $source -p1 < /tmp/siw-abortive-close.patch
  rm /tmp/siw-abortive-close.patch
  make -s -C /usr/src/linux-headers-$kver M=/tmp/$source/drivers/infiniband/sw/siw \
       CONFIG_RDMA_SIW=m modules
  strip --strip-debug /tmp/$source/drivers/infiniband/sw/siw/siw.ko
  install -D -m 0644 /tmp/$source/drivers/infiniband/sw/siw/siw.ko /lib/modules/$kver/updates/siw.ko
  rm -rf /tmp/$source
  depmod $kver
"
echo "sanlab: built siw.ko"

# --- keep only the modules the lab needs (and their dependencies) --------
keep=$(mktemp)
for m in $(cat "$modules_list"); do
  chroot "$root" modprobe --show-depends -S "$kver" "$m" | awk '$1 == "insmod" {print $2}'
done | sort -u > "$keep"
find "$root/lib/modules/$kver" -name '*.ko*' | sed "s|^$root||" | sort > "$keep.all"
comm -23 "$keep.all" "$keep" | sed "s|^|$root|" | xargs rm -f
chroot "$root" depmod "$kver"
echo "sanlab: kept $(wc -l < "$keep") kernel modules"
rm -f "$keep" "$keep.all"

# --- the build tools go; the kernel image is moved out by the packer -------
added=$(chroot "$root" dpkg-query -W -f '${Package}\n' | sort | comm -13 "$before" - | tr '\n' ' ')
chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q $added >/dev/null
rm -f "$before"
echo "sanlab: purged the build tools ($(echo $added | wc -w) packages)"
chroot "$root" apt-get clean

# --- udev: the device mapper's and multipath's rules only -----------------
# No udevd runs at boot.  sanlab starts one for SCSI multipath
# (targets/dm_multipath.py: multipathd waits for the device mapper's udev
# events), and that udevd must not rename NICs or RDMA devices, load
# drivers or start services: every other rule goes.
find "$root/usr/lib/udev/rules.d" -name '*.rules' ! -name '55-dm.rules' ! -name '56-dm-mpath.rules' \
  ! -name '60-multipath.rules' ! -name '95-dm-notify.rules' -delete
echo "sanlab: kept udev rules: $(ls "$root/usr/lib/udev/rules.d" | tr '\n' ' ')"

# --- sanlab's init and agent ----------------------------------------------
install -m 0755 "$here/init" "$root/init"
install -D -m 0755 "$here/agent.py" "$root/usr/lib/sanlab/agent.py"
echo "$kver" > "$root/usr/lib/sanlab/kernel-version"

# --- no shared SSH host keys: each guest makes its own when sshd starts ----
rm -f "$root"/etc/ssh/ssh_host_*

# --- what a guest never reads ----------------------------------------------
rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
       "$root"/usr/share/locale/* "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* \
       "$root"/usr/share/zoneinfo "$root"/lib/firmware "$root"/usr/lib/firmware
find "$root/usr/lib/python3" -name '__pycache__' -prune -exec rm -rf {} + 2>/dev/null || true
