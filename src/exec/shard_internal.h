/*
 * shard_internal.h - the seams between shard.c (the sharding and the
 * DeepSpeed/DDP collective builder), shard_units.c (units by module) and
 * shard_fsdp.c (PyTorch FSDP's collective builder). Part of exec's inner
 * interface.
 */
#ifndef REMAT_EXEC_SHARD_INTERNAL_H
#define REMAT_EXEC_SHARD_INTERNAL_H

#include "remat/exec.h"

/* Sets unit_of[t] for every param t that an op reads: the op (forward
 * order) that is the first to read a param of t's unit. With neither
 * cfg->wrap_depth nor cfg->unit_prefixes a unit is the params an op is
 * the first to read; otherwise a unit is a module prefix (remat/exec.h,
 * remat_shard_config) and *root gets the root unit's op (REMAT_NONE when
 * every param is in a listed unit). Other tensors get REMAT_NONE.
 * REMAT_EINVAL names the option and the op or prefix at fault (a graph
 * without attrs.module, a prefix no op's module has, a depth of 0);
 * REMAT_ENOMEM. O(ops x prefixes + refs). */
remat_status remat__shard_units(const remat_analysis *a, const remat_shard_config *cfg, uint32_t *unit_of,
                                uint32_t *root, remat_err *err);

/* remat_schedule_shard for cfg.fsdp FULL_SHARD and SHARD_GRAD_OP (NO_SHARD
 * is DDP's builder with one bucket per unit). */
remat_status remat__schedule_shard_fsdp(const remat_sharding *sh, const remat_schedule *in, remat_schedule *out,
                                        remat_err *err);

/* Per bucketed param, the schedule's BWD steps that write its gradient
 * (left, zeroed by the caller), and per bucket its params still to be
 * written (bucket_left, zeroed): the counts both collective builders reduce
 * a bucket by. O(instructions + their inputs^2). */
void remat__shard_count_writers(const remat_sharding *sh, const remat_schedule *in, uint32_t *left,
                                uint64_t *bucket_left);

/* At instruction I of that schedule (anything but a BWD step does
 * nothing): counts its gradient writes down in left and bucket_left and
 * writes to ready, in the order of the op's inputs, the buckets whose last
 * gradient it wrote, which the builder then reduces; returns how many. ready
 * has room for sh->n_buckets (a bucket is ready once). O(inputs^2). */
uint32_t remat__shard_ready_buckets(const remat_sharding *sh, remat_instr I, uint32_t *left, uint64_t *bucket_left,
                                    uint32_t *ready);

#endif
