#!/bin/bash
# H200: (1) the Slurm route on a real GPU: Debian's slurm-wlm 22.05 unpacked (files absent from / only),
# scripts/slurm-local with XCORR_SLURM_GPUS=real, a 2-shard quick sweep of fig15 + fig22 and its merge;
# (2) fig21 rerun from scratch (its results file predates the members format).
export XCORR_GIT_REVISION=$(cat .devscripts/rev)
source scripts/setup-env > $OUT/setup.log 2>&1 || { tail -30 $OUT/setup.log; exit 1; }
L=$OUT/slurm; mkdir -p $L
mkdir -p /tmp/sx && for f in .slurmdeb/*.deb; do dpkg -x $f /tmp/sx; done
(cd /tmp/sx && find . \( -type f -o -type l \) -printf '%P\n') | while read -r f; do
  [ -e "/$f" ] || [ -L "/$f" ] || { mkdir -p "$(dirname "/$f")"; cp -a "/tmp/sx/$f" "/$f"; echo "$f"; }; done > $L/installed.txt
ldconfig
for b in slurmctld slurmd slurmstepd; do [ -e /usr/sbin/$b ] || ln -s /usr/sbin/$b-wlm /usr/sbin/$b; done  # Debian's alternatives
echo "installed $(wc -l < $L/installed.txt) files"
for b in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/slurmstepd /usr/bin/sbatch /usr/sbin/munged; do ldd $b | grep "not found" | sed "s|^|$b: |"; done
ls -l /dev/nvidia* > $L/dev.txt 2>&1; cat $L/dev.txt
# cgroup v2 in this container: no systemd, processes in the root cgroup, no controllers delegated.
# The docker-in-docker move: every process into a child, then the controllers enabled below the root.
{ cat /proc/self/cgroup; ls /sys/fs/cgroup | head -30; cat /sys/fs/cgroup/cgroup.controllers /sys/fs/cgroup/cgroup.subtree_control
  mkdir -p /sys/fs/cgroup/init && xargs -rn1 < /sys/fs/cgroup/cgroup.procs > /sys/fs/cgroup/init/cgroup.procs 2>&1
  sed -e 's/ / +/g' -e 's/^/+/' < /sys/fs/cgroup/cgroup.controllers > /sys/fs/cgroup/cgroup.subtree_control
  mkdir -p /sys/fs/cgroup/system.slice; echo "subtree: $(cat /sys/fs/cgroup/cgroup.subtree_control)"; } > $L/cgroup.txt 2>&1
tail -3 $L/cgroup.txt
export XCORR_SLURM_GPUS=real
timeout 120 scripts/slurm-local start /tmp/xs > $L/start.out 2> $L/start.err; echo "slurm-local rc=$?"; tail -5 $L/start.err; [ -s $L/start.out ] || { tail -30 /tmp/xs/log/slurmd.log; cp -r /tmp/xs/log $L/slurm-logs; }
eval "$(cat $L/start.out)"
if [ -n "${SLURM_CONF:-}" ]; then
  sinfo -N -o "%N %T %G" | tee $L/sinfo.txt
  sbatch --gres=gpu:1 --output=$L/probe.out --wrap 'echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES; nvidia-smi -L; python3 -c "import torch; print(torch.cuda.device_count(), torch.cuda.get_device_name(0))"'
  timeout 60 scripts/slurm-sweep fig15 fig22 --shards 2 --dir /tmp/sw --results /tmp/sres -- --quick; echo "slurm-sweep rc=$?"
  for i in $(seq 300); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 1; done
  echo "queue empty after ${i}s"; squeue
  cat $L/probe.out
  tail -5 /tmp/sw/logs/*.out
  python3 - <<'P'
import json, glob, collections
for f in sorted(glob.glob('/tmp/sres/*/*.json')):
    d = json.load(open(f)); cs = d.get('cases', {})
    st = collections.Counter(c.get('status') for c in cs.values())
    dev = collections.Counter(c.get('device', {}).get('uuid') for c in cs.values())
    print(f, len(cs), dict(st), dict(dev), d.get('context', {}).get('gpu_name', ''))
P
  cp -r /tmp/sw $L/sweep; cp -r /tmp/sres $L/merged; cp -r /tmp/xs/log $L/slurm-logs; cp /tmp/xs/slurm.conf /tmp/xs/gres.conf /tmp/xs/cgroup.conf $L/
  timeout 60 scripts/slurm-local stop /tmp/xs
fi
tar czf $OUT/slurm.tgz -C $OUT slurm && rm -rf $L
