#!/bin/bash
# vm-run.sh - run one command inside a throw-away QEMU guest that has Soft-RoCE.
#
#   tests/rxe/vm-run.sh [-t SEC] [-m MB] [-c CPUS] [-s SHARE_DIR] [-a auto|kvm|tcg] [-n PORT]... -- CMD [ARG...]
#
# The host kernel has no RDMA, so we boot Debian's own kernel (which ships the
# rdma_rxe module) under QEMU. There is no disk image: the guest's root is the
# HOST's / exported read-only over virtio-9p with a tmpfs overlay on top, so
# every host binary and library (ctest, ibv_*, perftest, our build tree) runs
# unchanged in the guest; writes to it are lost at power-off. SHARE_DIR is the
# one writable 9p share, mounted at the same path, for results.
#
# Inside the guest CMD runs as root under bash, cwd = the caller's cwd, with
# VM_SHARE=SHARE_DIR, VM_ACCEL=kvm|tcg, VM_NIC_MACS (below) and the caller's
# RXE_*, DMB_*, GTEST_* variables. Its stdout+stderr are streamed here live
# and kept in SHARE_DIR/vm-out.log; the guest console is in
# SHARE_DIR/vm-console.log.
#
# The guest has no NIC, unless -n PORT asks for one (repeatable): the i-th -n
# adds a virtio NIC on QEMU user networking (restrict=on: no way out of the
# guest) with MAC 52:54:00:d0:00:0i that forwards the host's 127.0.0.1:PORT to
# port 22 of the guest address 10.0.2.15 on that NIC. The guest configures
# nothing itself: CMD finds the NICs by MAC (VM_NIC_MACS, in -n order), loads
# virtio_net and sets 10.0.2.15/24 on each (e.g. each in a network namespace
# of its own: tests/ansible/netns-hosts.sh).
#
# Options: -t hard wall-clock limit for the guest (default 900 s), -m guest RAM
# (default 4096 MB), -c vCPUs (default 2), -s share dir (default
# build/rxe-vm/share), -a accelerator (auto = KVM only where it can boot a
# stock kernel, else TCG software emulation), -n a NIC forwarding host port
# PORT to the guest's ssh port (above; at most 9).
#
# Exit status: CMD's exit status in the guest; 124 = time limit hit; 125 = the
# guest did not boot or gave no exit status (a diagnosis is printed); 2 = usage.
#
# First run: installs missing Debian packages (apt-get, sudo if not root),
# `apt-get download`s the current linux-image-*-amd64 package and builds a tiny
# busybox initramfs; both are cached in build/rxe-vm/ (delete it to refresh).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VMDIR=$ROOT/build/rxe-vm
PKGS="qemu-system-x86 busybox-static kmod cpio iproute2 rdma-core ibverbs-providers
      ibverbs-utils perftest libibverbs-dev"
export PATH=$PATH:/usr/sbin:/sbin   # depmod for non-root users

TMO=900 MEM=4096 CPUS=2 SHARE=$VMDIR/share ACCEL=auto FWD=()
usage() { sed -n '4p' "$0" | sed 's/^# */usage: /' >&2; exit 2; }
while getopts "t:m:c:s:a:n:h" o; do
  case $o in
    t) TMO=$OPTARG ;; m) MEM=$OPTARG ;; c) CPUS=$OPTARG ;; s) SHARE=$OPTARG ;; a) ACCEL=$OPTARG ;;
    n) [[ $OPTARG =~ ^[0-9]+$ ]] || usage; FWD+=("$OPTARG") ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || usage

log() { echo "[vm-run] $*" >&2; }
die() { log "ERROR: $*"; exit 125; }
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo

# --- 1. host packages -------------------------------------------------------
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
missing=$(for p in $PKGS; do installed "$p" || echo "$p"; done | xargs)
if [ -n "$missing" ]; then
  log "installing missing Debian packages: $missing"
  $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends $missing ||
    die "apt-get install failed; install by hand: apt-get install $missing"
fi

# --- 2. guest kernel + initramfs (cached; one setup at a time) ----------------
mkdir -p "$VMDIR"
exec 9>"$VMDIR/.setup.lock"
flock 9
KROOT=$VMDIR/kernel   # the linux-image .deb, unpacked (not installed)
if ! ls "$KROOT"/boot/vmlinuz-* >/dev/null 2>&1; then
  kpkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}'; }
  pkg=$(kpkg)
  [ -n "$pkg" ] || { $SUDO apt-get update -qq || true; pkg=$(kpkg); }
  [ -n "$pkg" ] || die "apt-cache cannot resolve linux-image-amd64 (is a Debian bookworm source in apt's sources?)"
  log "fetching guest kernel $pkg (once)"
  rm -rf "$VMDIR/debs" "$KROOT.tmp" && mkdir -p "$VMDIR/debs" "$KROOT.tmp"
  (cd "$VMDIR/debs" && timeout 600 apt-get download -q "$pkg") || die "apt-get download $pkg failed (network? apt sources?)"
  dpkg-deb -x "$VMDIR"/debs/"$pkg"_*.deb "$KROOT.tmp" && mv "$KROOT.tmp" "$KROOT"
fi
VMLINUZ=$(ls "$KROOT"/boot/vmlinuz-* | head -1)
KVER=${VMLINUZ##*/vmlinuz-}
MODDIR=$KROOT/lib/modules/$KVER
[ -f "$MODDIR/modules.dep" ] || depmod -b "$KROOT" "$KVER"

# The initramfs only has to mount the 9p root: busybox + virtio/9p/overlay
# modules (+ their dependencies, in load order) + the /init script below.
# Rebuilt when this script changes, since /init is embedded here.
INITRD=$VMDIR/initrd-$KVER.cpio.gz
if [ ! -f "$INITRD" ] || [ "$0" -nt "$INITRD" ]; then
  IR=$VMDIR/initrd.tmp
  rm -rf "$IR" && mkdir -p "$IR"/{bin,dev,proc,sys,lower,upper,newroot}
  cp /bin/busybox "$IR/bin/busybox"
  : >"$IR/modlist"
  for m in virtio_pci 9pnet_virtio 9p overlay; do
    # modules.dep line "a.ko: dep1.ko dep2.ko" -> load order dep2, dep1, a.
    line=$(grep -E "/$m\.ko:" "$MODDIR/modules.dep" || true)   # empty if built in
    for f in $(echo "${line/:/}" | awk '{for (i = NF; i >= 1; i--) print $i}'); do
      grep -qx "$f" "$IR/modlist" && continue
      mkdir -p "$IR/$(dirname "$f")" && cp "$MODDIR/$f" "$IR/$f" && echo "$f" >>"$IR/modlist"
    done
  done
  cat >"$IR/init" <<'EOF'
#!/bin/busybox sh
# Guest PID 1: mount host / (9p, ro) + tmpfs overlay as the new root, the share
# on top, then switch_root and run the command file from the share.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for f in $(cat /modlist); do insmod "/$f" || echo "init: insmod $f failed"; done
for a in $(cat /proc/cmdline); do
  case $a in vm.share=*) SHARE=${a#vm.share=} ;; vm.moddir=*) MODDIR=${a#vm.moddir=} ;; esac
done
P9="trans=virtio,version=9p2000.L,msize=262144"
mount -t 9p -o $P9,cache=loose,ro hostroot /lower || { echo "init: cannot mount host /"; poweroff -f; }
mount -t tmpfs -o size=50% tmpfs /upper && mkdir /upper/u /upper/w
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w /newroot ||
  { echo "init: cannot mount overlay root"; poweroff -f; }
R=/newroot
mkdir -p $R$SHARE && mount -t 9p -o $P9 share $R$SHARE || { echo "init: cannot mount share"; poweroff -f; }
mount -t proc proc $R/proc; mount -t sysfs sys $R/sys; mount -t devtmpfs dev $R/dev
mkdir -p $R/dev/pts $R/dev/shm; mount -t devpts devpts $R/dev/pts; mount -t tmpfs tmpfs $R/dev/shm
mount -t tmpfs tmpfs $R/run
# modprobe in the guest finds the guest kernel's modules (they live on the host).
K=$(uname -r); mkdir -p $R/lib/modules/$K && mount --bind $R$MODDIR $R/lib/modules/$K
cat >$R/run/stage2 <<STAGE2
#!/bin/sh
cut -d' ' -f1 /proc/uptime > $SHARE/.vm/boot_s
cd $SHARE && /bin/bash $SHARE/.vm/cmd.sh >> $SHARE/vm-out.log 2>&1
echo \$? > $SHARE/.vm/rc
sync
echo o > /proc/sysrq-trigger; sleep 5; echo b > /proc/sysrq-trigger
STAGE2
# switch_root (not chroot) so kernel helpers like request_module() find modprobe.
exec switch_root $R /usr/bin/env -i HOME=/root TERM=dumb \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/sh /run/stage2
EOF
  chmod +x "$IR/init"
  (cd "$IR" && find . | cpio -o -H newc --quiet | gzip -1) >"$INITRD.tmp" && mv "$INITRD.tmp" "$INITRD"
  rm -rf "$IR"
fi
flock -u 9

# --- 3. accelerator ----------------------------------------------------------
# /dev/kvm may exist but be unable to boot a stock kernel (e.g. kvm_pvm hosts,
# where the guest hangs early), so auto uses KVM only with real VMX/SVM.
if [ "$ACCEL" = auto ]; then
  ACCEL=tcg
  if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then ACCEL=kvm; fi
fi
case $ACCEL in
  kvm) AOPT=(-accel kvm -cpu host) ;;
  tcg) AOPT=(-accel 'tcg,thread=multi' -cpu max) ;;
  *) usage ;;
esac

# --- 4. NICs (-n) -------------------------------------------------------------
NIC=(-nic none) MACS=()
for i in "${!FWD[@]}"; do
  [ "$i" -lt 9 ] || usage
  MACS+=("52:54:00:d0:00:0$((i + 1))")
  NIC+=(-nic "user,model=virtio-net-pci,mac=${MACS[i]},restrict=on,hostfwd=tcp:127.0.0.1:${FWD[i]}-:22")
done
[ ${#FWD[@]} -eq 0 ] || NIC=("${NIC[@]:2}")

# --- 5. the command file, in the share --------------------------------------
mkdir -p "$SHARE" && SHARE=$(cd "$SHARE" && pwd)
mkdir -p "$SHARE/.vm"
exec 8>"$SHARE/.vm/lock"
flock -n 8 || die "another vm-run.sh is using share dir $SHARE (use -s DIR)"
{
  echo "#!/bin/bash"
  printf 'export VM_SHARE=%q VM_ACCEL=%q VM_NIC_MACS=%q\n' "$SHARE" "$ACCEL" "${MACS[*]}"
  for v in $(compgen -e | grep -E '^(RXE|DMB|GTEST)_' || true); do printf 'export %s=%q\n' "$v" "${!v}"; done
  echo "ulimit -l unlimited"
  printf 'cd %q || exit 125\n' "$PWD"
  printf '%q ' "$@"
  echo
} >"$SHARE/.vm/cmd.sh"
rm -f "$SHARE/.vm/rc" "$SHARE/.vm/boot_s"
: >"$SHARE/vm-out.log"
: >"$SHARE/vm-console.log"

# --- 6. boot ----------------------------------------------------------------

# no_timer_check: a TCG guest starved of host CPU can miss the kernel's
# IO-APIC timer check and panic at boot ("IO-APIC + timer doesn't work",
# seen once while other jobs held the host's cores).
t0=$(date +%s.%N)
set +e
timeout -k 10 "$TMO" qemu-system-x86_64 "${AOPT[@]}" -m "$MEM" -smp "$CPUS" -no-reboot \
  -display none -monitor none -serial file:"$SHARE/vm-console.log" "${NIC[@]}" \
  -kernel "$VMLINUZ" -initrd "$INITRD" \
  -append "console=ttyS0 panic=-1 no_timer_check rdinit=/init vm.share=$SHARE vm.moddir=$MODDIR" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs local,path="$SHARE",mount_tag=share,security_model=none,multidevs=remap \
  </dev/null &
qpid=$!
tail -n +1 -s 0.2 -F --pid=$qpid "$SHARE/vm-out.log" 2>/dev/null &   # live guest output
tpid=$!
trap 'kill $qpid $tpid 2>/dev/null' EXIT INT TERM
wait $qpid
qrc=$?
wait $tpid
trap - EXIT INT TERM
set -e
wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
boot=$(cat "$SHARE/.vm/boot_s" 2>/dev/null || echo '?')
log "accel=$ACCEL mem=${MEM}M cpus=$CPUS kernel=$KVER: guest up after ${boot}s, total wall ${wall}s"

diagnose() {   # $1 = what failed
  log "FAILED: $1"
  log "--- guest console tail ($SHARE/vm-console.log) ---"
  tail -25 "$SHARE/vm-console.log" >&2 || true
  log "--- how to fix ---"
  log "  guest too slow / command hangs: raise the limit with -t SEC (now $TMO)"
  log "  boot fails (panic, no init, 9p): rm -rf $VMDIR to refetch the kernel and rebuild the initramfs"
  log "  KVM trouble: force software emulation with -a tcg; out of memory: -m MB (now $MEM)"
}
if [ $qrc -eq 124 ] || [ $qrc -eq 137 ]; then
  diagnose "time limit of ${TMO}s hit (guest killed)"
  exit 124
fi
if [ ! -s "$SHARE/.vm/rc" ]; then
  if [ "$boot" = '?' ]; then diagnose "guest did not boot to the command (qemu exit $qrc)"
  else diagnose "command started but the guest gave no exit status (qemu exit $qrc; crash or poweroff?)"; fi
  exit 125
fi
exit "$(cat "$SHARE/.vm/rc")"
