# torch.sh - remat against PyTorch: the exporter (scripts/export_torch.py),
# the saved-activation bytes of every bundled exported graph against
# autograd's saved-tensor hooks, a sqrtn plan applied with
# torch.utils.checkpoint, and ResNet-50's block checkpointing against auto.
# They need /usr/bin/python3 with torch and torchvision (Debian:
# python3-torch python3-torchvision); without them this prints one skip
# line and adds no cases.
PY=/usr/bin/python3
if [ -x "$PY" ] && "$PY" -c "import torch, torchvision" >/dev/null 2>&1; then
    expect torch_export_resnet18 0 "export_torch: resnet18" -- \
        "$PY" scripts/export_torch.py torchvision:resnet18 --batch 2 --size 64 -o "$T/r18.json"
    expect torch_export_loads 0 "backward steps" -- "$REMAT" lifetimes "$T/r18.json"
    # Two gloo processes on 127.0.0.1: DDP's Adam state on each rank equals
    # remat's per-rank replay exactly; ZeroRedundancyOptimizer's ranks add up
    # to it (tests/torch/dp_optimizer_state.py says why they differ per rank).
    expect torch_dp_optimizer_state 0 "ZeroRedundancyOptimizer ranks together: 93516096 B, remat unsharded 93516096 B (equal)" -- \
        timeout 300 "$PY" tests/torch/dp_optimizer_state.py "$REMAT" "$T/r18.json"
    expect torch_export_meta 0 '"model":"torchvision:resnet18","batch":2,"input_shape":[2,3,64,64]' -- cat "$T/r18.json"
    expect torch_export_factory 0 "export_torch: chain" -- \
        "$PY" scripts/export_torch.py scripts.models:chain --input-shape 64 --batch 4 --arg blocks=3 --arg width=64 \
        -o "$T/chain.json"
    expect torch_export_factory_loads 0 "graph chain: 10 ops" -- "$REMAT" lifetimes "$T/chain.json"
    expect torch_export_bad_spec 1 "MODEL must be" -- "$PY" scripts/export_torch.py resnet18
    expect torch_export_no_such_model 1 "torchvision has no model 'nosuch'" -- \
        "$PY" scripts/export_torch.py torchvision:nosuch
    expect torch_models_trace 0 "traced unet" -- "$PY" tests/torch/fx_trace.py
    # The bundled graphs are what their meta.command makes today (line 2,
    # the meta, names the output file, so it differs).
    "$PY" scripts/export_torch.py torchvision:resnet18 --batch 2 --name resnet18-b2 -o "$T/r18b2.json" 2>/dev/null
    sed 2d graphs/resnet18-b2.json >"$T/bundled.json"
    sed 2d "$T/r18b2.json" >"$T/again.json"
    expect torch_bundled_resnet18_reproduces 0 "identical" -- \
        sh -c "cmp \"$T/bundled.json\" \"$T/again.json\" && echo identical"
    for g in $(grep -l '"exporter":"scripts/export_torch.py"' graphs/*.json); do
        expect "torch_saved_bytes_$(basename "$g" .json)" 0 "ok $(basename "$g")" -- \
            "$PY" tests/torch/saved_bytes.py "$REMAT" "$g"
    done
    expect torch_sqrtn_checkpoint 0 "measured reduction" -- "$PY" tests/torch/checkpoint_sqrtn.py "$REMAT"
    expect torch_resnet50_blocks_vs_auto 0 "E / E_auto" -- "$PY" scripts/bench_resnet50.py "$REMAT" --no-export
else
    echo "skip torch.sh: $PY cannot import torch and torchvision (apt-get install python3-torch python3-torchvision); no PyTorch checks run"
fi
