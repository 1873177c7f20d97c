/*
 * check_util.c - src/util: the atomic file writer, the id map and byte sizes.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, umask */
#include "test_util.h"
#include "util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- remat__write_file_atomic ---------------------------------------- */

static mode_t mode_of(const char *path)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    return st.st_mode & 07777;
}

/* Writes text to path under the given umask and returns the file's mode. */
static mode_t write_under(const char *path, const char *text, mode_t mask)
{
    mode_t old = umask(mask);
    remat_err err;
    remat_err_init(&err);
    remat_status st = remat__write_file_atomic(path, text, strlen(text), &err);
    umask(old);
    ck_assert_msg(st == REMAT_OK, "%s", err.msg);
    return mode_of(path);
}

static void read_back(const char *path, const char *want)
{
    char *text;
    size_t len;
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat__read_file(path, &text, &len, &err), REMAT_OK);
    ck_assert_str_eq(text, want);
    remat__free(text);
}

START_TEST(write_should_create_files_with_the_mode_the_umask_allows)
{
    /* A new output is 0666 less the umask, as any tool's would be, not the
     * 0600 of a temporary file. */
    char dir[] = "/tmp/remat-util-XXXXXX", path[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/out.json", dir);
    ck_assert_uint_eq(write_under(path, "one", 022), 0644);
    read_back(path, "one");
    unlink(path);
    ck_assert_uint_eq(write_under(path, "two", 077), 0600);
    unlink(path);
    ck_assert_uint_eq(write_under(path, "three", 002), 0664);
    read_back(path, "three");
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(write_should_keep_the_mode_of_a_file_it_replaces)
{
    char dir[] = "/tmp/remat-util-XXXXXX", path[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/out.json", dir);
    write_under(path, "old", 022);
    ck_assert_int_eq(chmod(path, 0640), 0);
    /* The umask does not apply to the replaced file's own mode. */
    ck_assert_uint_eq(write_under(path, "new", 077), 0640);
    read_back(path, "new");
    ck_assert_int_eq(chmod(path, 0755), 0);
    ck_assert_uint_eq(write_under(path, "newer", 022), 0755);
    read_back(path, "newer");
    /* No temporary file is left beside it. */
    char cmd[128];
    snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) -eq 1", dir);
    ck_assert_int_eq(system(cmd), 0);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(write_should_leave_nothing_when_it_cannot_write)
{
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat__write_file_atomic("/nonexistent-remat-dir/out.json", "x", 1, &err), REMAT_EIO);
    ck_assert_msg_contains(&err, "/nonexistent-remat-dir/out.json: cannot create temporary file");
}
END_TEST

/* ---- remat_strmap ----------------------------------------------------- */

START_TEST(strmap_should_find_every_key_of_a_large_map_and_refuse_repeats)
{
    /* Ids that differ only in their last digits, the case that clustered
     * the slots before the hash was mixed; the map starts small and grows. */
    enum { N = 200000 };
    char *ids = malloc((size_t)N * 16);
    ck_assert_ptr_nonnull(ids);
    remat_strmap m;
    ck_assert_int_eq(remat_strmap_init(&m, 4), REMAT_OK);
    for (uint32_t i = 0; i < N; i++) {
        char *id = ids + (size_t)i * 16;
        snprintf(id, 16, "%c%u", i % 2 ? 't' : 'w', i);
        ck_assert_int_eq(remat_strmap_put(&m, id, i, NULL), REMAT_OK);
    }
    ck_assert_uint_eq(m.count, N);
    ck_assert_uint_le(m.count * 2, m.cap);
    for (uint32_t i = 0; i < N; i++) {
        uint32_t v = UINT32_MAX;
        ck_assert(remat_strmap_get(&m, ids + (size_t)i * 16, &v));
        ck_assert_uint_eq(v, i);
    }
    uint32_t prev = 0;
    char again[16];
    snprintf(again, sizeof again, "t%u", 12345u);
    ck_assert_int_eq(remat_strmap_put(&m, again, 7, &prev), REMAT_EINVAL);
    ck_assert_uint_eq(prev, 12345);
    ck_assert(!remat_strmap_get(&m, "t", NULL));
    ck_assert(!remat_strmap_get(&m, "", NULL));
    ck_assert(!remat_strmap_get(&m, "w200001", NULL));
    /* Keys longer than one hashing word, and the empty key. */
    const char *longer = "a.rather.long.identifier/with:odd \"chars\" and \\ more";
    ck_assert_int_eq(remat_strmap_put(&m, longer, 1, NULL), REMAT_OK);
    ck_assert_int_eq(remat_strmap_put(&m, "", 2, NULL), REMAT_OK);
    uint32_t v;
    ck_assert(remat_strmap_get(&m, "a.rather.long.identifier/with:odd \"chars\" and \\ more", &v) && v == 1);
    ck_assert(remat_strmap_get(&m, "", &v) && v == 2);
    remat_strmap_destroy(&m);
    remat_strmap_destroy(&m); /* twice is harmless */
    free(ids);
}
END_TEST

START_TEST(strmap_should_report_out_of_memory_when_growing)
{
    remat_strmap m;
    ck_assert_int_eq(remat_strmap_init(&m, 1), REMAT_OK);
    static const char *const keys[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
    remat_status st = REMAT_OK;
    for (size_t i = 0; i < 9 && st == REMAT_OK; i++) {
        remat__alloc_fail_at(i == 8 ? 1 : 0);
        st = remat_strmap_put(&m, keys[i], (uint32_t)i, NULL);
        remat__alloc_fail_at(0);
    }
    /* The ninth key needs 32 slots; that allocation failed and the map is
     * unchanged. */
    ck_assert_int_eq(st, REMAT_ENOMEM);
    ck_assert_uint_eq(m.count, 8);
    for (size_t i = 0; i < 8; i++)
        ck_assert(remat_strmap_get(&m, keys[i], NULL));
    remat_strmap_destroy(&m);
}
END_TEST

/* ---- remat_parse_bytes ------------------------------------------------ */

/* Every unit, at 1 and at 1.5 (and at the largest whole count below 2^64),
 * against the multiplier computed here by repeated multiplication; values
 * near and past 2^64; fractions that are and are not whole bytes. */
START_TEST(units_should_parse_every_unit_exactly_and_refuse_what_is_not_a_size)
{
    static const struct {
        const char *unit;
        uint64_t base;
        int power;
    } U[] = {{"B", 1, 0},     {"KiB", 1024, 1}, {"MiB", 1024, 2}, {"GiB", 1024, 3}, {"TiB", 1024, 4},
             {"PiB", 1024, 5}, {"EiB", 1024, 6}, {"KB", 1000, 1},  {"MB", 1000, 2},  {"GB", 1000, 3},
             {"TB", 1000, 4}, {"PB", 1000, 5},  {"EB", 1000, 6}};
    remat_err err;
    char text[64];
    uint64_t v;
    for (size_t i = 0; i < sizeof U / sizeof U[0]; i++) {
        uint64_t m = 1;
        for (int k = 0; k < U[i].power; k++)
            m *= U[i].base;
        snprintf(text, sizeof text, "1%s", U[i].unit);
        remat_err_init(&err);
        ck_assert_msg(remat_parse_bytes(text, "--budget", &v, &err) == REMAT_OK && v == m, "%s: %s", text, err.msg);
        /* Case does not matter, and a space may separate the unit. */
        snprintf(text, sizeof text, "1 %s", U[i].unit);
        for (char *c = text; *c; c++)
            *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
        remat_err_init(&err);
        ck_assert_msg(remat_parse_bytes(text, "--budget", &v, &err) == REMAT_OK && v == m, "%s: %s", text, err.msg);
        if (m > 1) {
            snprintf(text, sizeof text, "1.5%s", U[i].unit);
            remat_err_init(&err);
            ck_assert_msg(remat_parse_bytes(text, "--budget", &v, &err) == REMAT_OK && v == m + m / 2, "%s: %s",
                          text, err.msg);
        }
        /* The largest whole count of the unit that fits, then one more. */
        uint64_t most = UINT64_MAX / m;
        snprintf(text, sizeof text, "%llu%s", (unsigned long long)most, U[i].unit);
        remat_err_init(&err);
        ck_assert_msg(remat_parse_bytes(text, "--budget", &v, &err) == REMAT_OK && v == most * m, "%s: %s", text,
                      err.msg);
        if (m == 1) /* most + 1 is 2^64: in the list below */
            continue;
        snprintf(text, sizeof text, "%llu%s", (unsigned long long)most + 1, U[i].unit);
        remat_err_init(&err);
        ck_assert_int_eq(remat_parse_bytes(text, "--budget", &v, &err), REMAT_EOVERFLOW);
        ck_assert_msg_contains(&err, "exceeds 2^64-1");
    }
    static const struct {
        const char *text;
        remat_status st;
        const char *msg;
    } bad[] = {
        {"18446744073709551616", REMAT_EOVERFLOW, "exceeds 2^64-1"},
        {"99999999999999999999999", REMAT_EOVERFLOW, "exceeds 2^64-1"},
        {"16EiB", REMAT_EOVERFLOW, "exceeds 2^64-1"},
        {"1.5B", REMAT_EINVAL, "not a whole number of bytes"},
        {"0.0001KiB", REMAT_EINVAL, "not a whole number of bytes"},
        {"4K", REMAT_EINVAL, "unknown unit in '4K'"},
        {"1ZiB", REMAT_EINVAL, "unknown unit"},
        {"-1", REMAT_EINVAL, "is not a byte size"},
        {"GiB", REMAT_EINVAL, "is not a byte size"},
        {"", REMAT_EINVAL, "empty byte size"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        remat_err_init(&err);
        ck_assert_msg(remat_parse_bytes(bad[i].text, "--budget", &v, &err) == bad[i].st, "'%s': %s", bad[i].text,
                      err.msg);
        ck_assert_msg_contains(&err, bad[i].msg);
        ck_assert_msg_contains(&err, "--budget");
    }
    /* 2^64 - 1 exactly, and a fraction of EiB that is whole. */
    remat_err_init(&err);
    ck_assert_int_eq(remat_parse_bytes("18446744073709551615", "--budget", &v, &err), REMAT_OK);
    ck_assert_uint_eq(v, UINT64_MAX);
    ck_assert_int_eq(remat_parse_bytes("15.5EiB", "--budget", &v, &err), REMAT_OK);
    ck_assert_uint_eq(v, 31ULL << 59);
}
END_TEST

Suite *util_suite(void)
{
    Suite *s = suite_create("util");
    TCase *w = tcase_create("write");
    tcase_add_test(w, write_should_create_files_with_the_mode_the_umask_allows);
    tcase_add_test(w, write_should_keep_the_mode_of_a_file_it_replaces);
    tcase_add_test(w, write_should_leave_nothing_when_it_cannot_write);
    suite_add_tcase(s, w);
    TCase *m = tcase_create("strmap");
    tcase_add_test(m, strmap_should_find_every_key_of_a_large_map_and_refuse_repeats);
    tcase_add_test(m, strmap_should_report_out_of_memory_when_growing);
    tcase_set_timeout(m, 60);
    suite_add_tcase(s, m);
    TCase *u = tcase_create("units");
    tcase_add_test(u, units_should_parse_every_unit_exactly_and_refuse_what_is_not_a_size);
    suite_add_tcase(s, u);
    return s;
}
