#!/usr/bin/env bash
# A one-machine Kubernetes node for the node tests (tests/e2e/node/): the
# bridge radwasm0 (10.233.0.1/24) with a guard against forwarding off it,
# containerd with a private root, state and CNI config, and, once a control
# plane listens on the bridge, kubelet, kube-proxy and kube-scheduler. Test
# infrastructure only; see docs/node-tests.md. Needs root.
#
#   node.sh up                       down, then the bridge, guard, sysctls,
#                                    containerd and the pause image
#   node.sh start KUBECONFIG CA      kubelet, kube-proxy, kube-scheduler
#   node.sh import ARCHIVE           an OCI archive into containerd (k8s.io)
#   node.sh drain KUBECONFIG         cordon, delete every pod, wait for the
#                                    sandboxes to stop (before `down`)
#   node.sh down                     stop everything, restore the host
#   node.sh leftovers                print what a node left on the host;
#                                    exit 1 if anything
#
# Every change to the host is undone by `down`, which is idempotent and also
# works after a run that was killed midway (`up` runs it first). The sysctls
# the node may change are recorded in $state/host-before before the first
# change, and so is which of the shared host paths existed; `down` restores
# them. Configs and daemon logs go to RADWASM_NODE_LOG_DIR (default
# target/node-run/ of this checkout), kept after `down` for reading.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

bridge=radwasm0
address=10.233.0.1
subnet=10.233.0.0/24
node_name=radwasm-node
state=/var/lib/radwasm-node
run=/run/radwasm-node
logs="${RADWASM_NODE_LOG_DIR:-$root/target/node-run}"
sock="$run/containerd/containerd.sock"
guard=RADWASM-NODE-GUARD
# Sysctls kubelet, kube-proxy, the bridge CNI plugin or this script may set.
sysctls=(net.ipv4.ip_forward vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.conf.all.route_localnet
  net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables net.netfilter.nf_conntrack_max
  net.netfilter.nf_conntrack_tcp_timeout_established net.netfilter.nf_conntrack_tcp_timeout_close_wait
  net.ipv6.conf.all.forwarding)
# Host paths outside our own directories that the daemons create.
shared_paths=(/var/lib/cni /var/log/containers /var/log/pods /var/lib/kubelet /run/netns /run/containerd /etc/cni /opt/cni)
daemons=(kube-scheduler kube-proxy kubelet containerd)

say() { echo "node.sh: $*" >&2; }
ctr_() { ctr --address "$sock" -n k8s.io "$@"; }

bins() {
  if [[ -n "${RADWASM_NODE_BIN_DIR:-}" ]]; then
    echo "$RADWASM_NODE_BIN_DIR"
  else
    bash "$here/build.sh" | tail -n 1
  fi
}

# --- down -----------------------------------------------------------------

# The pid in $run/<name>.pid if that process still runs the binary we started.
pid_of() {
  local f="$run/$1.pid" pid exe
  [[ -f "$f" ]] || return 1
  pid="$(cat "$f")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  exe="$(readlink "/proc/$pid/exe" 2> /dev/null)" || return 1
  [[ "$(basename "${exe% (deleted)}")" == "$1" ]] || return 1
  echo "$pid"
}

stop_daemon() { # <name> <seconds>
  local pid i
  pid="$(pid_of "$1")" || { rm -f "$run/$1.pid"; return 0; }
  kill -TERM "$pid" 2> /dev/null || true
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2> /dev/null || true
  while kill -0 "$pid" 2> /dev/null; do sleep 0.1; done
  rm -f "$run/$1.pid"
}

# Every process in the kubepods cgroups (the pods' containers and sandboxes).
kill_pods() {
  local i pids
  for ((i = 0; i < 50; i++)); do
    pids="$( (find /sys/fs/cgroup/*/kubepods -name cgroup.procs -exec cat {} + 2> /dev/null || true) | sort -u)"
    [[ -z "$pids" ]] && return 0
    # shellcheck disable=SC2086 # a list of pids
    kill -KILL $pids 2> /dev/null || true
    sleep 0.1
  done
  say "processes left in the kubepods cgroups: $pids"
}

# containerd-shim processes serving our containerd (they outlive it).
kill_shims() {
  local pid
  for pid in $(pgrep -x containerd-shim || true); do
    if tr '\0' ' ' < "/proc/$pid/cmdline" 2> /dev/null | grep -q -- "-address $sock"; then
      kill -KILL "$pid" 2> /dev/null || true
    fi
  done
}

unmount_under() { # every mount point under the given prefixes, deepest first
  local prefixes=("$@") mp p
  awk '{ print $5 }' /proc/self/mountinfo | sort -r | while read -r mp; do
    mp="$(printf '%b' "$mp")"
    for p in "${prefixes[@]}"; do
      if [[ "$mp" == "$p" || "$mp" == "$p"/* ]]; then
        umount "$mp" 2> /dev/null || umount -l "$mp" 2> /dev/null || say "cannot unmount $mp"
      fi
    done
  done
}

iptables_clean() { # <iptables|ip6tables>
  local ipt="$1" table chain rule
  command -v "$ipt" > /dev/null || return 0
  for table in filter nat mangle raw; do
    "$ipt" -t "$table" -S > /dev/null 2>&1 || continue
    # Jumps from the built-in chains first, then our chains' rules, then them.
    { "$ipt" -t "$table" -S | grep -E '^-A [A-Z]+ .*-j (KUBE-|'"$guard"')' || true; } | while read -r rule; do
      # shellcheck disable=SC2086 # a rule as iptables -S prints it
      eval "$ipt -t $table ${rule/-A/-D}" 2> /dev/null || true
    done
    for chain in $("$ipt" -t "$table" -S | awk '$1 == "-N" && ($2 ~ /^KUBE-/ || $2 == "'"$guard"'") { print $2 }'); do
      "$ipt" -t "$table" -F "$chain" 2> /dev/null || true
    done
    for chain in $("$ipt" -t "$table" -S | awk '$1 == "-N" && ($2 ~ /^KUBE-/ || $2 == "'"$guard"'") { print $2 }'); do
      "$ipt" -t "$table" -X "$chain" 2> /dev/null || say "cannot delete $ipt chain $table/$chain"
    done
  done
}

remove_cgroups() {
  local d
  kill_pods
  for d in /sys/fs/cgroup/*/kubepods; do
    [[ -d "$d" && ! -L "$(dirname "$d")" ]] || continue
    find "$d" -depth -type d -exec rmdir {} + 2> /dev/null || true
    [[ -d "$d" ]] && say "cannot remove cgroup $d"
  done
  return 0
}

restore_host() {
  local before="$state/host-before" line key value path
  [[ -f "$before" ]] || return 0
  while read -r line; do
    case "$line" in
      sysctl\ *)
        read -r _ key value <<< "$line"
        sysctl -q -w "$key=$value" > /dev/null 2>&1 || say "cannot restore $key=$value"
        ;;
      absent\ *)
        path="${line#absent }"
        unmount_under "$path"
        rm -rf "$path"
        ;;
    esac
  done < "$before"
  rm -f "$before"
}

down() {
  # Pods' processes first would let kubelet restart them: kubelet and the
  # control-plane clients go first, then the pods, then containerd.
  stop_daemon kube-scheduler 5
  stop_daemon kube-proxy 5
  stop_daemon kubelet 10
  kill_pods
  if pid_of containerd > /dev/null; then
    # Lets containerd unmount the containers' root file systems.
    local c
    for c in $(ctr_ tasks ls -q 2> /dev/null || true); do ctr_ tasks delete -f "$c" > /dev/null 2>&1 || true; done
    for c in $(ctr_ containers ls -q 2> /dev/null || true); do ctr_ containers delete "$c" > /dev/null 2>&1 || true; done
  fi
  stop_daemon containerd 10
  kill_shims
  # Network namespaces of our pods (the CRI names them cni-<uuid>); a
  # namespace goes, with its end of the veth pair, once nothing holds it.
  local ns
  for ns in /run/netns/cni-*; do
    [[ -e "$ns" ]] || continue
    umount "$ns" 2> /dev/null || umount -l "$ns" 2> /dev/null || true
    rm -f "$ns"
  done
  unmount_under "$state" "$run"
  local link
  for link in $( (ip -o link show master "$bridge" 2> /dev/null || true) | awk -F': ' '{ print $2 }' | cut -d@ -f1); do
    ip link delete "$link" 2> /dev/null || true
  done
  ip link delete "$bridge" 2> /dev/null || true
  iptables_clean iptables
  iptables_clean ip6tables
  remove_cgroups
  restore_host
  # The control plane's temp dir, when its test process was killed (a
  # normal exit removes it unless RADWASM_REAL_KUBE_KEEP=1).
  local dir
  if [[ -f "$run/control-plane-dir" && -z "${RADWASM_REAL_KUBE_KEEP:-}" ]]; then
    dir="$(cat "$run/control-plane-dir")"
    [[ "$dir" == /tmp/realkube-* ]] && rm -rf "$dir"
  fi
  rm -rf "$state" "$run"
}

# --- up -------------------------------------------------------------------

record_host() {
  mkdir -p "$state"
  local before="$state/host-before" key value path
  : > "$before.tmp"
  for key in "${sysctls[@]}"; do
    if value="$(sysctl -n "$key" 2> /dev/null)"; then
      echo "sysctl $key $value" >> "$before.tmp"
    fi
  done
  for path in "${shared_paths[@]}"; do
    [[ -e "$path" ]] || echo "absent $path" >> "$before.tmp"
  done
  mv "$before.tmp" "$before"
  # A copy that outlives `down`, for `leftovers`.
  mkdir -p "$logs"
  cp "$before" "$logs/host-before"
}

network_up() {
  ip link add "$bridge" type bridge
  ip addr add "$address/24" dev "$bridge"
  ip link set "$bridge" up
  # Nothing forwarded crosses between the bridge and any other interface,
  # whatever else (kube-proxy) adds later: mangle runs before filter and no
  # one else writes mangle/FORWARD; filter/FORWARD gets the same guard first.
  local ipt table
  for ipt in iptables ip6tables; do
    for table in mangle filter; do
      "$ipt" -t "$table" -N "$guard"
      "$ipt" -t "$table" -A "$guard" -i "$bridge" ! -o "$bridge" -j DROP
      "$ipt" -t "$table" -A "$guard" ! -i "$bridge" -o "$bridge" -j DROP
      "$ipt" -t "$table" -I FORWARD 1 -j "$guard"
    done
  done
  # Pod to ClusterIP to pod crosses the bridge through the host's routing.
  sysctl -q -w net.ipv4.ip_forward=1
}

start_daemon() { # <name> <binary> <args...>
  local name="$1" bin="$2"
  shift 2
  setsid "$bin" "$@" < /dev/null > "$logs/$name.log" 2>&1 &
  echo $! > "$run/$name.pid"
}

containerd_up() {
  local b="$1"
  mkdir -p "$state/cni" "$state/opt" "$run/containerd" "$logs"
  cat > "$state/cni/10-radwasm.conflist" << EOF
{
  "cniVersion": "0.4.0",
  "name": "radwasm",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$state/cni-ipam",
        "ranges": [[{ "subnet": "$subnet", "rangeStart": "10.233.0.10", "rangeEnd": "10.233.0.250", "gateway": "$address" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    }
  ]
}
EOF
  cat > "$logs/containerd.toml" << EOF
version = 2
root = "$state/containerd"
state = "$run/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$sock"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$state/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$(cat "$b/pause-image.ref")"
  # The machine's bounding set has no CAP_SYS_RESOURCE: runc may not lower
  # a container's oom_score_adj below its own.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "${RADWASM_NODE_SNAPSHOTTER:-overlayfs}"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$state/cni"
    max_conf_num = 1
EOF
  start_daemon containerd containerd --config "$logs/containerd.toml"
  local i
  for ((i = 0; i < 300; i++)); do
    ctr_ version > /dev/null 2>&1 && break
    pid_of containerd > /dev/null || { say "containerd exited; its log:"; tail -n 40 "$logs/containerd.log" >&2; return 1; }
    sleep 0.1
  done
  ctr_ version > /dev/null || { say "containerd did not answer in 30 s"; return 1; }
  import "$b/pause-image.tar"
}

import() { # <OCI archive>: into containerd's k8s.io namespace, unpacked for the CRI
  ctr_ images import --snapshotter "${RADWASM_NODE_SNAPSHOTTER:-overlayfs}" "$1" > /dev/null
}

up() {
  [[ "$(id -u)" == 0 ]] || { say "needs root"; exit 1; }
  local missing=() c b
  for c in containerd ctr runc iptables ip6tables conntrack ip setsid; do
    command -v "$c" > /dev/null || missing+=("$c")
  done
  [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local ]] || missing+=(containernetworking-plugins)
  if ((${#missing[@]})); then
    say "missing: ${missing[*]} (Debian: apt-get install containerd runc containernetworking-plugins iptables conntrack)"
    exit 1
  fi
  b="$(bins)"
  down
  mkdir -p "$logs" "$run"
  rm -f "$logs"/{containerd,kubelet,kube-proxy,kube-scheduler}.log
  record_host
  network_up
  containerd_up "$b"
}

start() { # <kubeconfig> <ca file>
  local kubeconfig="$1" ca="$2" b
  b="$(bins)"
  cat > "$logs/kubelet.yaml" << EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $address
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$sock
podLogsDir: $state/pod-logs
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: $ca }
authorization: { mode: Webhook }
clusterDomain: cluster.local
# Eviction and image GC off in effect: they would act on the host's disk,
# which the tests do not own, and the imported images cannot be pulled back.
evictionHard: { memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%" }
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
EOF
  cat > "$logs/kube-proxy.yaml" << EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: { kubeconfig: $kubeconfig }
hostnameOverride: $node_name
mode: iptables
clusterCIDR: $subnet
# The machine's bounding set has no CAP_SYS_RESOURCE.
oomScoreAdj: 0
bindAddress: $address
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$address/32"]
iptables: { localhostNodePorts: false, masqueradeAll: false }
# Zero leaves the host's conntrack settings alone.
conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s }
EOF
  start_daemon kubelet "$b/kubelet" --config="$logs/kubelet.yaml" --kubeconfig="$kubeconfig" \
    --root-dir="$state/kubelet" --node-ip="$address" --hostname-override="$node_name" --v=1
  start_daemon kube-proxy "$b/kube-proxy" --config="$logs/kube-proxy.yaml" --v=1
  start_daemon kube-scheduler "$b/kube-scheduler" --kubeconfig="$kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port=0 --v=1
}

drain() { # <kubeconfig>
  local kubeconfig="$1" i
  kubectl --kubeconfig="$kubeconfig" --request-timeout=10s cordon "$node_name" > /dev/null 2>&1 || true
  kubectl --kubeconfig="$kubeconfig" --request-timeout=10s delete pods --all --all-namespaces \
    --grace-period=5 --wait=false > /dev/null 2>&1 || true
  # The CRI tears a sandbox's network down when kubelet stops it.
  for ((i = 0; i < 300; i++)); do
    [[ -z "$(ctr_ tasks ls -q 2> /dev/null)" ]] && return 0
    pid_of kubelet > /dev/null || return 0
    sleep 0.1
  done
  say "pods still running after 30 s; down kills them"
}

leftovers() {
  local found=0 p ipt table line key value now
  report() { echo "$*"; found=1; }
  for p in kubelet kube-proxy kube-scheduler containerd containerd-shim; do
    pgrep -x "$p" > /dev/null && report "process: $p ($(pgrep -x "$p" | tr '\n' ' '))"
  done
  while read -r line; do report "mount: $line"; done < <(awk '$5 ~ /kubelet|containerd|netns|radwasm-node/ { print $5 }' /proc/self/mountinfo)
  ip link show "$bridge" > /dev/null 2>&1 && report "link: $bridge"
  while read -r line; do report "veth: $line"; done < <(ip -o link show type veth 2> /dev/null | awk -F': ' '{ print $2 }')
  for ipt in iptables ip6tables; do
    command -v "$ipt" > /dev/null || continue
    for table in filter nat mangle raw; do
      "$ipt" -t "$table" -S 2> /dev/null | grep -qE "KUBE-|$guard" && report "$ipt $table: KUBE- or $guard rules"
    done
  done
  for p in /sys/fs/cgroup/*/kubepods; do [[ -d "$p" ]] && report "cgroup: $p"; done
  for p in "$state" "$run"; do [[ -e "$p" ]] && report "path: $p"; done
  # Against the host as the last `up` found it.
  if [[ -f "$logs/host-before" ]]; then
    while read -r line; do
      case "$line" in
        sysctl\ *)
          read -r _ key value <<< "$line"
          now="$(sysctl -n "$key" 2> /dev/null || true)"
          [[ "$now" == "$value" ]] || report "sysctl: $key is $now, was $value"
          ;;
        absent\ *) [[ -e "${line#absent }" ]] && report "path: ${line#absent }" ;;
      esac
    done < "$logs/host-before"
  fi
  return "$found"
}

case "${1:-}" in
  up) up ;;
  start) start "${2:?kubeconfig}" "${3:?CA file}" ;;
  import) import "${2:?archive}" ;;
  drain) drain "${2:?kubeconfig}" ;;
  down) down ;;
  leftovers) leftovers ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
