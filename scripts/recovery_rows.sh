#!/usr/bin/env bash
# The fits `--recovery steer=0.3` makes beside the clean ones, for Table 1's three IL structures:
# one recovery lap on the demonstration's seed 0, each structure fitted to the clean lap and it
# (polc fit's defaults: its closed-loop check prints the training seeds' score), then 100 unseen
# tracks. docs/results.md, "Causal confusion", has the figures.
#
#   scripts/recovery_rows.sh OUT_DIR REFINED.pol     (run from the repository's root)
set -euo pipefail
out=${1:?usage: scripts/recovery_rows.sh OUT_DIR REFINED.pol}
refined=${2:?the refined structure (e.g. the pol block of examples/car_racing/session/replies/007.md)}
P=.venv/bin/polc
D=examples/car_racing/demo.parquet
mkdir -p "$out"
$P demos car_racing --episodes 1 --seed 0 --perturb steer=0.3 -o "$out/dart03.parquet" -q
for s in mlp initial refined; do
  f=examples/car_racing/$s.pol; [ "$s" = refined ] && f=$refined
  $P fit "$f" --demos $D "$out/dart03.parquet" -o "$out/$s.params" -q
  $P eval "$f" --params "$out/$s.params" --env car_racing --seeds 100
done
