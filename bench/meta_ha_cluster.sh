# shellcheck shell=bash
# bench/meta_ha_cluster.sh: sourced (not run) by bench/meta_ha_cost.sh and
# bench/compare.sh (target logfs-ha). Starts, on 127.0.0.1, a three-member
# etcd and a logfs cluster whose meta is one process or three replicas
# journaling to that etcd (docs/meta_ha.md), with three segment servers and
# a FUSE mount; no cluster secret. Every process started is appended to the
# array HA_PIDS, which the caller stops (kill by pid) and whose mounts it
# unmounts; all state lives under the ROOT the caller gives.
#
#   ha_start_etcd ROOT
#       etcd members e0..e2, data in ROOT/etcd<i>, logs ROOT/etcd<i>.log;
#       sets HA_ETCD (the client endpoints, comma-separated); returns 1 if
#       etcd is not healthy within 20 s.
#   ha_start_cluster BIN ROOT NAME REPLICAS [MOUNT_FLAG...]
#       meta (REPLICAS > 1: that many replicas on HA_ETCD, etcd cluster
#       name NAME), segds 1..3 and a mount at ROOT/mnt-NAME made with BIN;
#       state and logs in ROOT/NAME-*; sets HA_MNT; returns 1 if the
#       mount does not come up within 20 s. Extra meta flags go in the
#       environment variable HA_META_FLAGS (space-separated).
# Needs python3 (free ports), etcd and etcdctl.

HA_PIDS=()
HA_ETCD=''
HA_MNT=''

ha_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
ha_wait_file() {
  local _
  for _ in $(seq 1 200); do [ -s "$1" ] && return 0; sleep 0.05; done
  echo "no $1" >&2
  return 1
}

ha_start_etcd() {
  local root=$1 cluster='' i _
  local -a client_port peer_port
  for i in 0 1 2; do
    client_port[i]=$(ha_free_port) peer_port[i]=$(ha_free_port)
    cluster+="e$i=http://127.0.0.1:${peer_port[i]},"
  done
  for i in 0 1 2; do
    etcd --name "e$i" --data-dir "$root/etcd$i" --listen-client-urls "http://127.0.0.1:${client_port[i]}" \
      --advertise-client-urls "http://127.0.0.1:${client_port[i]}" --listen-peer-urls "http://127.0.0.1:${peer_port[i]}" \
      --initial-advertise-peer-urls "http://127.0.0.1:${peer_port[i]}" --initial-cluster "${cluster%,}" \
      --initial-cluster-state new >"$root/etcd$i.log" 2>&1 &
    HA_PIDS+=($!)
  done
  HA_ETCD="127.0.0.1:${client_port[0]},127.0.0.1:${client_port[1]},127.0.0.1:${client_port[2]}"
  for _ in $(seq 1 200); do
    ETCDCTL_API=3 etcdctl --endpoints="$HA_ETCD" endpoint health >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "etcd did not come up (logs: $root/etcd*.log)" >&2
  return 1
}

ha_start_cluster() {
  local bin=$1 root=$2 name=$3 replicas=$4 metas='' i d _
  shift 4
  for i in $(seq 1 "$replicas"); do
    d="$root/$name-meta$i"
    if [ "$replicas" -gt 1 ]; then
      # shellcheck disable=SC2086
      "$bin" meta --data_dir="$d" --listen=127.0.0.1:0 --address_file="$d.addr" \
        --etcd="$HA_ETCD" --cluster="$name" ${HA_META_FLAGS:-} >"$d.log" 2>&1 &
    else
      # shellcheck disable=SC2086
      "$bin" meta --data_dir="$d" --listen=127.0.0.1:0 --address_file="$d.addr" \
        ${HA_META_FLAGS:-} >"$d.log" 2>&1 &
    fi
    HA_PIDS+=($!)
    ha_wait_file "$d.addr" || return 1
    metas+="$(cat "$d.addr"),"
  done
  metas=${metas%,}
  for i in 1 2 3; do
    "$bin" segd --data_dir="$root/$name-segd$i" --listen=127.0.0.1:0 --meta="$metas" \
      --address_file="$root/$name-segd$i.addr" >"$root/$name-segd$i.log" 2>&1 &
    HA_PIDS+=($!)
    ha_wait_file "$root/$name-segd$i.addr" || return 1
  done
  HA_MNT=$root/mnt-$name
  mkdir -p "$HA_MNT"
  for _ in $(seq 1 100); do
    "$bin" mount --meta="$metas" --log_file="$root/$name-mount.log" "$@" "$HA_MNT" 2>/dev/null && return 0
    sleep 0.2  # an election or registrations still in progress
  done
  echo "mount of $name failed (log: $root/$name-mount.log)" >&2
  return 1
}
