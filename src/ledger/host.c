/*
 * host.c - the ledger's host side: where Adam's step counters live and what
 * optimizer offload moves off the device (remat/ledger.h, remat_ledger_step
 * and offload_optimizer).
 *
 * Design: ledger.c computes every line as if it were on the device; this
 * file runs last and moves what the engine keeps on the host to r->host, so
 * total_bytes stays the device's figure and a replay at a device budget sees
 * only device bytes. The rules follow the source they cite: PyTorch 1.13's
 * torch/optim/adam.py for the step tensors; DeepSpeed's stage_1_and_2.py
 * (cpu_offload) and stage3.py (offload_optimizer) for what offload moves and
 * what crosses PCIe each step.
 */
#include "ledger_internal.h"

#include <stdio.h>

/* Moves line l to the host. */
static int to_host(remat_ledger_line *l, remat_ledger_result *r, remat_err *err)
{
    if (!remat__ledger_add(r->host.elements, l->elements, &r->host.elements, err, "host elements") ||
        !remat__ledger_add(r->host.bytes, l->bytes, &r->host.bytes, err, "host bytes"))
        return 0;
    l->elements = l->bytes = 0;
    return 1;
}

int remat__ledger_host(const remat_ledger_config *cfg, uint64_t n_tensors, uint64_t n_groups,
                       remat_ledger_result *r, remat_err *err)
{
    r->host.dtype = REMAT_LEDGER_DT_NONE;
    int z = (int)r->zero_stage, sharded = z >= 1 && r->dp > 1;
    /* The tensors the optimizer steps. */
    r->step_tensors = !sharded ? n_tensors : z <= 2 ? 1 : n_groups;
    int adam = r->optimizer == REMAT_LEDGER_ADAM || r->optimizer == REMAT_LEDGER_ADAMW;
    if (cfg->offload_optimizer) {
        if (!sharded) {
            remat_err_set(err, REMAT_EINVAL,
                          "offload_optimizer: DeepSpeed offloads the optimizer of ZeRO stages 1-3 only (give `zero_stage` "
                          "1, 2 or 3 and `dp` N >= 2)");
            return 0;
        }
        /* Stages 1-2 (cpu_offload): the fp32 master partition, the states
         * over it and its fp32 gradient (single_partition_of_fp32_groups[i]
         * .grad) are on the CPU; each param's bit16 gradient is copied there
         * after its reduction and freed (param.grad = None), so the device
         * keeps no gradient partition. Stage 3 (offload_optimizer): the same
         * with grad_partitions_flat_buffer on the CPU in the gradients'
         * precision. */
        /* The rank's partition: stage 3's sum of ceil(E / dp); at stages
         * 1-2 every rank holds dp padded partitions of the weights. */
        uint64_t part = z == 3 ? r->gradients.elements : r->weights.elements / r->dp;
        uint64_t gbytes = 0, up = 0;
        uint32_t gsize = z == 3 ? remat_ledger_dtype_size(r->gradients.dtype) : 4;
        uint32_t wsize = remat_ledger_dtype_size(r->weights.dtype);
        if (!remat_u64_mul(part, gsize, &gbytes) || !remat_u64_mul(part, wsize, &up) ||
            !to_host(&r->optimizer_state, r, err) || !to_host(&r->master_weights, r, err) ||
            !remat__ledger_add(r->host.elements, part, &r->host.elements, err, "host elements") ||
            !remat__ledger_add(r->host.bytes, gbytes, &r->host.bytes, err, "host bytes") ||
            !remat__ledger_add(part, part, &r->offload_elements, err, "offload elements") ||
            !remat__ledger_add(gbytes, up, &r->offload_bytes, err, "offload bytes")) {
            if (err->code == REMAT_OK)
                remat_err_set(err, REMAT_EOVERFLOW, "offload_optimizer: host bytes exceed 2^64-1");
            return 0;
        }
        /* The device keeps no gradient partition: stage 1 and 2 free each
         * gradient after copying it down, stage 3 reduces into the host's. */
        r->gradients.elements = r->gradients.bytes = 0;
        ASSUME(r,
               "offload_optimizer cpu: optimizer state, master weights and the %llu-element gradient partition "
               "(%u B each) on the host (DeepSpeed %s); per step %llu elements move: the gradient partition down "
               "(%llu B) and the updated weight partition up (%llu B, in %s)",
               (unsigned long long)part, gsize, z == 3 ? "stage3.py offload_optimizer" : "stage_1_and_2.py cpu_offload",
               (unsigned long long)r->offload_elements, (unsigned long long)gbytes, (unsigned long long)up,
               remat_ledger_dtype_name(r->weights.dtype));
        ASSUME(r, "offload: each bit16 gradient lives on the device only from its backward step to its "
                  "bucket's reduction (the replay counts it there), so the gradients line is 0");
    }
    if (!adam || cfg->step == REMAT_LEDGER_STEP_NONE) {
        if (adam)
            ASSUME(r, "Adam's step counter: a Python int per group (DeepSpeed FusedAdam / DeepSpeedCPUAdam): no tensor");
        return 1;
    }
    uint64_t sb;
    if (!remat_u64_mul(r->step_tensors, 4, &sb)) {
        remat_err_set(err, REMAT_EOVERFLOW, "Adam step counters: %llu x 4 B exceeds 2^64-1",
                      (unsigned long long)r->step_tensors);
        return 0;
    }
    int host = cfg->step == REMAT_LEDGER_STEP_HOST || cfg->offload_optimizer;
    remat_ledger_line *l = host ? &r->host : &r->optimizer_state;
    if (!remat__ledger_add(l->elements, r->step_tensors, &l->elements, err, "step elements") ||
        !remat__ledger_add(l->bytes, sb, &l->bytes, err, "Adam step counters"))
        return 0;
    ASSUME(r,
           "Adam's step counter: a 4-byte f32 tensor per tensor stepped (%llu: %s), %llu B on the %s (PyTorch "
           "1.13 torch/optim/adam.py: %s)",
           (unsigned long long)r->step_tensors,
           !sharded ? "every trainable param" : z <= 2 ? "the rank's one flat fp32 partition" : "one per ZeRO 3 sub group",
           (unsigned long long)sb, host ? "host" : "device",
           cfg->step == REMAT_LEDGER_STEP_HOST ? "torch.tensor(0.) on the CPU unless capturable"
                                               : "capturable or fused: on the param's device");
    return 1;
}
