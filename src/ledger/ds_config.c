/*
 * ds_config.c - a DeepSpeed JSON config read as remat's options
 * (remat/ledger.h, remat_ledger_ds_read).
 *
 * Design: one small reader per section, each with the list of keys DeepSpeed
 * knows there (deepspeed/runtime/zero/config.py and offload_config.py at
 * commit 38327e0, the engine's fp16, bf16, optimizer and
 * activation_checkpointing sections). Every key is sorted into one of three
 * kinds: read (it decides a rank's memory, and remat models it), accepted
 * (it changes nothing remat models: logging, loss scaling, the learning
 * rate), or refused (it would change memory in a way remat does not model,
 * so a silent acceptance would be a wrong answer). A key DeepSpeed does not
 * know is refused too, with its path, because a misspelt key is otherwise
 * the engine's default in disguise. Absent keys take DeepSpeed's defaults.
 */
#include "remat/ledger.h"
#include "../load/json_glue.h"
#include "../util/util_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char *source;
    remat_err *err;
} reader;

static int bad(reader *R, const char *path, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int bad(reader *R, const char *path, const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    remat_err_loc loc;
    remat_err_loc_make(&loc, R->source, path, 0, 0, NULL);
    remat_err_set_at(R->err, REMAT_EPARSE, &loc, "%s: %s: %s", R->source, path, msg);
    return 0;
}

/* Refuses keys outside `keys` and keys given twice (cJSON would keep both
 * and a lookup would see only the first). */
static int known_keys(reader *R, const cJSON *obj, const char *path, const char *const *keys)
{
    if (!cJSON_IsObject(obj))
        return bad(R, path, "must be an object");
    for (const cJSON *c = obj->child; c; c = c->next) {
        int found = 0;
        for (size_t i = 0; keys[i] && !found; i++)
            found = c->string && strcmp(c->string, keys[i]) == 0;
        char where[256];
        snprintf(where, sizeof where, "%s%s%s", path, *path ? "." : "", c->string ? c->string : "");
        if (!found)
            return bad(R, where, "unknown key (DeepSpeed has no such setting here, or remat does not know it)");
        for (const cJSON *d = obj->child; d != c; d = d->next)
            if (d->string && strcmp(d->string, c->string) == 0)
                return bad(R, where, "given twice");
    }
    return 1;
}

static void path_of(char *out, size_t cap, const char *path, const char *key)
{
    snprintf(out, cap, "%s%s%s", path, *path ? "." : "", key);
}

static int get_bool(reader *R, const cJSON *obj, const char *path, const char *key, bool *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return 1;
    char where[256];
    path_of(where, sizeof where, path, key);
    if (!cJSON_IsBool(v))
        return bad(R, where, "must be true or false");
    *out = cJSON_IsTrue(v);
    return 1;
}

/* A non-negative whole number (DeepSpeed writes sizes as 5e8 too); "auto"
 * is the Hugging Face Trainer's placeholder, not a size. Returns -1 when
 * absent. */
static int get_uint(reader *R, const cJSON *obj, const char *path, const char *key, uint64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return -1;
    char where[256];
    path_of(where, sizeof where, path, key);
    if (cJSON_IsString(v) && strcmp(v->valuestring, "auto") == 0)
        return bad(R, where, "\"auto\" is filled in by the Hugging Face Trainer: give the number");
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0 ||
        v->valuedouble != (double)(uint64_t)v->valuedouble)
        return bad(R, where, "must be a whole number from 0 to 2^53");
    *out = (uint64_t)v->valuedouble;
    return 1;
}

/* Keys that DeepSpeed has and that change nothing remat models. */
static const char *const top_keys[] = {
    "zero_optimization", "bf16", "fp16", "optimizer", "train_micro_batch_size_per_gpu",
    "activation_checkpointing", "communication_data_type", "train_batch_size", "gradient_accumulation_steps",
    "scheduler", "gradient_clipping", "steps_per_print", "wall_clock_breakdown", "prescale_gradients",
    "gradient_predivide_factor", "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer", "dump_state",
    "memory_breakdown", "flops_profiler", "tensorboard", "wandb", "csv_monitor", "comms_logger", "amp",
    "data_types", NULL};

static const char *const zero_keys[] = {
    "stage", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size", "use_multi_rank_bucket_allreduce",
    "allgather_partitions", "allgather_bucket_size", "overlap_comm", "load_from_fp32_weights",
    "elastic_checkpoint", "offload_param", "offload_optimizer", "sub_group_size", "cpu_offload",
    "cpu_offload_param", "cpu_offload_use_pin_memory", "stage3_prefetch_bucket_size", "prefetch_bucket_size",
    "stage3_param_persistence_threshold", "param_persistence_threshold", "stage3_model_persistence_threshold",
    "model_persistence_threshold", "stage3_max_live_parameters", "max_live_parameters",
    "stage3_max_reuse_distance", "max_reuse_distance", "stage3_gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save", "gather_16bit_weights_on_model_save", "ignore_unused_parameters",
    "legacy_stage1", "round_robin_gradients", "zero_hpz_partition_size", "zero_quantized_weights",
    "zero_quantized_nontrainable_weights", "zero_quantized_gradients", "zeropp_loco_param", "mics_shard_size",
    "mics_hierarchical_params_gather", "memory_efficient_linear", "pipeline_loading_checkpoint",
    "override_module_apply", "log_trace_cache_warnings", "stage3_module_granularity_threshold",
    "stage3_use_all_reduce_for_fetch_params", NULL};

/* The first of two spellings (DeepSpeed's alias and field name) given. */
static int get_uint2(reader *R, const cJSON *z, const char *a, const char *b, uint64_t *out)
{
    if (cJSON_GetObjectItemCaseSensitive(z, a) && cJSON_GetObjectItemCaseSensitive(z, b))
        return bad(R, "zero_optimization", "give one of '%s' and '%s' (the same setting)", a, b);
    int rc = get_uint(R, z, "zero_optimization", a, out);
    return rc < 0 ? get_uint(R, z, "zero_optimization", b, out) : rc;
}

static int offload(reader *R, const cJSON *z, const char *key, bool *on)
{
    static const char *const opt_keys[] = {"device", "nvme_path", "buffer_count", "pin_memory", "pipeline_read",
                                           "pipeline_write", "fast_init", "ratio", NULL};
    static const char *const param_keys[] = {"device", "nvme_path", "buffer_count", "buffer_size", "max_in_cpu",
                                             "pin_memory", NULL};
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(z, key);
    char path[128];
    path_of(path, sizeof path, "zero_optimization", key);
    if (!o || cJSON_IsNull(o))
        return 1;
    int is_opt = strcmp(key, "offload_optimizer") == 0;
    if (!known_keys(R, o, path, is_opt ? opt_keys : param_keys))
        return 0;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "device");
    char where[160];
    path_of(where, sizeof where, path, "device");
    if (d && !cJSON_IsString(d))
        return bad(R, where, "must be \"none\", \"cpu\" or \"nvme\"");
    const char *dev = d ? d->valuestring : "none";
    if (strcmp(dev, "nvme") == 0)
        return bad(R, where, "NVMe offload (ZeRO-Infinity) is not modelled: remat budgets device and host memory");
    if (strcmp(dev, "none") != 0 && strcmp(dev, "cpu") != 0)
        return bad(R, where, "must be \"none\", \"cpu\" or \"nvme\" (got \"%s\")", dev);
    const cJSON *ratio = cJSON_GetObjectItemCaseSensitive(o, "ratio");
    if (ratio && (!cJSON_IsNumber(ratio) || ratio->valuedouble != 1.0))
        return bad(R, "zero_optimization.offload_optimizer.ratio",
                   "partial offload (a ratio below 1) is not modelled: remat offloads all or nothing");
    *on = strcmp(dev, "cpu") == 0;
    if (*on && !is_opt)
        return bad(R, where, "parameter offload (offload_param) is not modelled yet: give \"none\"");
    return 1;
}

static int zero_section(reader *R, const cJSON *z, remat_ds_config *c)
{
    if (!known_keys(R, z, "zero_optimization", zero_keys))
        return 0;
    uint64_t v;
    int rc;
    if ((rc = get_uint(R, z, "zero_optimization", "stage", &v)) == 0)
        return 0;
    if (rc > 0) {
        if (v > 3)
            return bad(R, "zero_optimization.stage", "stage %llu does not exist (0, 1, 2 or 3)", (unsigned long long)v);
        c->stage = (uint32_t)v;
        c->has |= REMAT_DS_HAS_STAGE;
    }
    c->overlap_comm = c->stage == 3; /* config.py overlap_comm_valid */
    struct {
        const char *a, *b;
        uint64_t *dst;
        uint32_t bit;
    } sizes[] = {
        {"reduce_bucket_size", NULL, &c->reduce_bucket_size, REMAT_DS_HAS_REDUCE_BUCKET},
        {"allgather_bucket_size", NULL, &c->allgather_bucket_size, REMAT_DS_HAS_ALLGATHER_BUCKET},
        {"sub_group_size", NULL, &c->sub_group_size, REMAT_DS_HAS_SUB_GROUP},
        {"stage3_prefetch_bucket_size", "prefetch_bucket_size", &c->prefetch_bucket_size, REMAT_DS_HAS_PREFETCH},
        {"stage3_max_live_parameters", "max_live_parameters", &c->max_live_parameters, REMAT_DS_HAS_MAX_LIVE},
        {"stage3_max_reuse_distance", "max_reuse_distance", &c->max_reuse_distance, REMAT_DS_HAS_MAX_REUSE},
        {"stage3_param_persistence_threshold", "param_persistence_threshold", &c->persistence_threshold,
         REMAT_DS_HAS_PERSISTENCE},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        rc = sizes[i].b ? get_uint2(R, z, sizes[i].a, sizes[i].b, sizes[i].dst)
                        : get_uint(R, z, "zero_optimization", sizes[i].a, sizes[i].dst);
        if (rc == 0)
            return 0;
        if (rc > 0)
            c->has |= sizes[i].bit;
    }
    /* A bound remat would drop silently is refused instead. */
    uint64_t unused;
    if ((rc = get_uint2(R, z, "stage3_model_persistence_threshold", "model_persistence_threshold", &unused)) == 0)
        return 0;
    if (rc > 0 && unused < 9007199254740992ull)
        return bad(R, "zero_optimization.stage3_model_persistence_threshold",
                   "a bound on the persistent params' total is not modelled (leave it out: unbounded)");
    if ((rc = get_uint(R, z, "zero_optimization", "zero_hpz_partition_size", &unused)) == 0)
        return 0;
    if (rc > 0 && unused > 1)
        return bad(R, "zero_optimization.zero_hpz_partition_size", "ZeRO++ hpZ (a secondary partition) is not modelled");
    if ((rc = get_uint(R, z, "zero_optimization", "mics_shard_size", &unused)) == 0)
        return 0;
    static const char *const quant[] = {"zero_quantized_weights", "zero_quantized_nontrainable_weights",
                                        "zero_quantized_gradients", "stage3_use_all_reduce_for_fetch_params"};
    for (size_t i = 0; i < sizeof quant / sizeof quant[0]; i++) {
        bool on = false;
        if (!get_bool(R, z, "zero_optimization", quant[i], &on))
            return 0;
        if (on) {
            char where[128];
            path_of(where, sizeof where, "zero_optimization", quant[i]);
            return bad(R, where, "ZeRO++ quantized or all-reduce collectives are not modelled");
        }
    }
    const cJSON *mics = cJSON_GetObjectItemCaseSensitive(z, "mics_shard_size");
    if (mics && cJSON_IsNumber(mics) && mics->valuedouble > 0)
        return bad(R, "zero_optimization.mics_shard_size", "MiCS sharding groups are not modelled");
    const cJSON *loco = cJSON_GetObjectItemCaseSensitive(z, "zeropp_loco_param");
    if (loco && !cJSON_IsNull(loco))
        return bad(R, "zero_optimization.zeropp_loco_param", "ZeRO++ LoCo is not modelled");
    bool cpu_offload = false;
    if (!get_bool(R, z, "zero_optimization", "contiguous_gradients", &c->contiguous_gradients) ||
        !get_bool(R, z, "zero_optimization", "overlap_comm", &c->overlap_comm) ||
        !get_bool(R, z, "zero_optimization", "cpu_offload", &cpu_offload) ||
        !offload(R, z, "offload_optimizer", &c->offload_optimizer) || !offload(R, z, "offload_param", &c->offload_param))
        return 0;
    /* cpu_offload is the deprecated spelling of offload_optimizer cpu. */
    c->offload_optimizer |= cpu_offload;
    bool cpu_param = false;
    if (!get_bool(R, z, "zero_optimization", "cpu_offload_param", &cpu_param))
        return 0;
    if (cpu_param)
        return bad(R, "zero_optimization.cpu_offload_param", "parameter offload is not modelled yet");
    return 1;
}

static int precision(reader *R, const cJSON *root, remat_ds_config *c)
{
    static const char *const bf16_keys[] = {"enabled", "immediate_grad_update", "check_grad_overflow", NULL};
    static const char *const fp16_keys[] = {"enabled", "auto_cast", "loss_scale", "initial_scale_power",
                                            "loss_scale_window", "hysteresis", "consecutive_hysteresis",
                                            "min_loss_scale", "fp16_master_weights_and_grads", NULL};
    bool on[2] = {false, false};
    const char *names[2] = {"bf16", "fp16"};
    for (int i = 0; i < 2; i++) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, names[i]);
        if (!s)
            continue;
        if (!known_keys(R, s, names[i], i ? fp16_keys : bf16_keys) || !get_bool(R, s, names[i], "enabled", &on[i]))
            return 0;
        bool halves = false;
        if (i && !get_bool(R, s, "fp16", "fp16_master_weights_and_grads", &halves))
            return 0;
        if (halves)
            return bad(R, "fp16.fp16_master_weights_and_grads", "an fp16 master copy is not modelled (remat keeps it f32)");
    }
    if (on[0] && on[1])
        return bad(R, "fp16.enabled", "bf16 and fp16 are both enabled: DeepSpeed refuses that too");
    c->weights = on[0] ? REMAT_LEDGER_DT_BF16 : on[1] ? REMAT_LEDGER_DT_F16 : REMAT_LEDGER_DT_F32;
    if (on[0] || on[1])
        c->has |= REMAT_DS_HAS_PRECISION;
    const cJSON *comm = cJSON_GetObjectItemCaseSensitive(root, "communication_data_type");
    if (comm && !cJSON_IsNull(comm)) {
        remat_err sub;
        remat_err_init(&sub);
        if (!cJSON_IsString(comm) || remat_ledger_dtype_parse(comm->valuestring, "communication_data_type", &c->comm,
                                                              &sub) != REMAT_OK || c->comm == REMAT_LEDGER_DT_NONE)
            return bad(R, "communication_data_type", "must be \"fp32\", \"fp16\" or \"bf16\"");
    }
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(root, "data_types");
    if (types && !cJSON_IsNull(types)) {
        static const char *const type_keys[] = {"grad_accum_dtype", NULL};
        if (!known_keys(R, types, "data_types", type_keys))
            return 0;
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(types, "grad_accum_dtype");
        if (g && !cJSON_IsNull(g))
            return bad(R, "data_types.grad_accum_dtype",
                       "a gradient accumulation dtype apart from the weights' is not modelled (leave it out)");
    }
    const cJSON *amp = cJSON_GetObjectItemCaseSensitive(root, "amp");
    bool amp_on = false;
    if (amp && !cJSON_IsObject(amp))
        return bad(R, "amp", "must be an object");
    if (amp && !get_bool(R, amp, "amp", "enabled", &amp_on))
        return 0;
    if (amp_on)
        return bad(R, "amp.enabled", "NVIDIA Apex AMP is not modelled (use bf16 or fp16)");
    return 1;
}

static int optimizer(reader *R, const cJSON *root, remat_ds_config *c)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
    if (!o)
        return 1;
    static const char *const keys[] = {"type", "params", NULL};
    if (!known_keys(R, o, "optimizer", keys))
        return 0;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    if (!cJSON_IsString(t))
        return bad(R, "optimizer.type", "must be a string (\"Adam\", \"AdamW\", \"Lion\")");
    if (strcasecmp(t->valuestring, "adam") == 0)
        c->optimizer = REMAT_LEDGER_ADAM;
    else if (strcasecmp(t->valuestring, "adamw") == 0)
        c->optimizer = REMAT_LEDGER_ADAMW;
    else if (strcasecmp(t->valuestring, "lion") == 0)
        c->optimizer = REMAT_LEDGER_LION;
    else
        return bad(R, "optimizer.type", "'%s' is not modelled (Adam, AdamW or Lion)", t->valuestring);
    c->has |= REMAT_DS_HAS_OPTIMIZER;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "params");
    if (p && !cJSON_IsObject(p))
        return bad(R, "optimizer.params", "must be an object");
    bool torch_adam = false;
    if (p && !get_bool(R, p, "optimizer.params", "torch_adam", &torch_adam))
        return 0;
    /* DeepSpeed builds FusedAdam (or DeepSpeedCPUAdam when offloaded), whose
     * step is an int; torch_adam asks for torch.optim's, whose step is a
     * tensor (on the CPU unless capturable). */
    c->step = torch_adam && !c->offload_optimizer ? REMAT_LEDGER_STEP_HOST : REMAT_LEDGER_STEP_NONE;
    return 1;
}

static int checkpointing(reader *R, const cJSON *root, remat_ds_config *c)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "activation_checkpointing");
    if (!a)
        return 1;
    static const char *const keys[] = {"partition_activations", "cpu_checkpointing", "contiguous_memory_optimization",
                                       "number_checkpoints", "synchronize_checkpoint_boundary", "profile", NULL};
    const char *P = "activation_checkpointing";
    if (!known_keys(R, a, P, keys) || !get_bool(R, a, P, "partition_activations", &c->partition_activations) ||
        !get_bool(R, a, P, "cpu_checkpointing", &c->cpu_checkpointing) ||
        !get_bool(R, a, P, "contiguous_memory_optimization", &c->contiguous_memory_optimization) ||
        !get_bool(R, a, P, "synchronize_checkpoint_boundary", &c->synchronize_checkpoint_boundary) ||
        !get_bool(R, a, P, "profile", &c->profile))
        return 0;
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(a, "number_checkpoints");
    if (n && !cJSON_IsNull(n) && get_uint(R, a, P, "number_checkpoints", &c->number_checkpoints) == 0)
        return 0;
    c->has |= REMAT_DS_HAS_ACTIVATION_CKPT;
    return 1;
}

remat_status remat_ledger_ds_read(const char *text, size_t len, const char *source, remat_ds_config *c,
                                  remat_err *err)
{
    memset(c, 0, sizeof *c);
    /* DeepSpeed's defaults (config.py). */
    c->reduce_bucket_size = c->allgather_bucket_size = 500000000;
    c->prefetch_bucket_size = 50000000;
    c->max_live_parameters = 1000000000;
    c->max_reuse_distance = 1000000000; /* config.py ZeroConfig.max_reuse_distance */
    c->persistence_threshold = 100000;
    c->sub_group_size = 1000000000;
    c->contiguous_gradients = true;
    c->weights = REMAT_LEDGER_DT_F32;
    c->comm = REMAT_LEDGER_DT_AUTO;
    c->optimizer = REMAT_LEDGER_ADAM;
    c->step = REMAT_LEDGER_STEP_NONE;
    cJSON *root;
    remat_status st = remat__json_document(text, len, source, &root, err);
    if (st != REMAT_OK)
        return st;
    reader R = {source, err};
    int ok = known_keys(&R, root, "", top_keys);
    const cJSON *z = cJSON_GetObjectItemCaseSensitive(root, "zero_optimization");
    if (ok && z)
        ok = zero_section(&R, z, c);
    if (ok)
        ok = precision(&R, root, c) && optimizer(&R, root, c) && checkpointing(&R, root, c);
    if (ok) {
        int rc = get_uint(&R, root, "", "train_micro_batch_size_per_gpu", &c->micro_batch);
        ok = rc != 0;
    }
    cJSON_Delete(root);
    return ok ? REMAT_OK : err->code;
}

/* ---- Writing the plan back ------------------------------------------------ */

/* Sets obj[key] = v (a new item), dropping the key and its other spelling. */
static int put(cJSON *obj, const char *key, const char *alias, cJSON *v)
{
    if (!v)
        return 0;
    cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
    if (alias)
        cJSON_DeleteItemFromObjectCaseSensitive(obj, alias);
    if (!cJSON_AddItemToObject(obj, key, v)) {
        cJSON_Delete(v);
        return 0;
    }
    return 1;
}

static cJSON *section(cJSON *root, const char *key)
{
    cJSON *s = cJSON_GetObjectItemCaseSensitive(root, key);
    if (cJSON_IsObject(s))
        return s;
    return put(root, key, NULL, cJSON_CreateObject()) ? cJSON_GetObjectItemCaseSensitive(root, key) : NULL;
}

remat_status remat_ledger_ds_write(const char *text, size_t len, const char *source, const remat_ds_settings *set,
                                   char **out, size_t *out_len, remat_err *err)
{
    *out = NULL;
    *out_len = 0;
    remat_ds_config check;
    remat_status st = remat_ledger_ds_read(text, len, source, &check, err); /* refusals first */
    if (st != REMAT_OK)
        return st;
    cJSON *root;
    if ((st = remat__json_document(text, len, source, &root, err)) != REMAT_OK)
        return st;
    cJSON *z = section(root, "zero_optimization");
    cJSON *ac = section(root, "activation_checkpointing");
    int ok = z && ac && put(z, "stage", NULL, cJSON_CreateNumber(set->stage));
    if (ok && set->reduce_bucket_size)
        ok = put(z, "reduce_bucket_size", NULL, cJSON_CreateNumber((double)set->reduce_bucket_size));
    if (ok && set->stage == 3)
        ok = put(z, "stage3_prefetch_bucket_size", "prefetch_bucket_size",
                 cJSON_CreateNumber((double)set->prefetch_bucket_size)) &&
             put(z, "stage3_max_live_parameters", "max_live_parameters",
                 cJSON_CreateNumber((double)set->max_live_parameters)) &&
             put(z, "stage3_max_reuse_distance", "max_reuse_distance",
                 cJSON_CreateNumber((double)set->max_reuse_distance)) &&
             put(z, "stage3_param_persistence_threshold", "param_persistence_threshold",
                 cJSON_CreateNumber((double)set->persistence_threshold)) &&
             put(z, "sub_group_size", NULL, cJSON_CreateNumber((double)set->sub_group_size));
    if (ok) {
        cJSON_DeleteItemFromObjectCaseSensitive(z, "cpu_offload");
        cJSON *o = section(z, "offload_optimizer");
        ok = o && put(o, "device", NULL, cJSON_CreateString(set->offload_optimizer ? "cpu" : "none"));
    }
    if (ok)
        ok = put(ac, "partition_activations", NULL, cJSON_CreateFalse()) &&
             put(ac, "cpu_checkpointing", NULL, cJSON_CreateFalse()) &&
             put(ac, "number_checkpoints", NULL,
                 set->number_checkpoints ? cJSON_CreateNumber((double)set->number_checkpoints) : cJSON_CreateNull());
    char *printed = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!printed)
        return remat_err_set(err, REMAT_ENOMEM, "%s: out of memory writing the DeepSpeed config", source);
    size_t n = strlen(printed);
    *out = remat__malloc(n + 2);
    if (*out) {
        memcpy(*out, printed, n);
        (*out)[n] = '\n';
        (*out)[n + 1] = 0;
        *out_len = n + 1;
    }
    cJSON_free(printed);
    return *out ? REMAT_OK : remat_err_set(err, REMAT_ENOMEM, "%s: out of memory writing the DeepSpeed config", source);
}
