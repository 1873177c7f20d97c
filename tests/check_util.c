/*
 * check_util.c - src/util: the output writer (atomic for files, in place for
 * devices and FIFOs, through symbolic links), the id map, byte sizes, the
 * defined double-to-integer conversions, UTF-8 and JSON string escaping.
 */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, umask */
#include "test_util.h"
#include "util/util_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

START_TEST(grow_should_double_to_the_need_and_refuse_overflow)
{
    int *a = NULL;
    size_t cap = 0;
    ck_assert(remat__grow((void **)&a, &cap, 1, sizeof *a));
    ck_assert_uint_eq(cap, 64);            /* the first capacity */
    ck_assert(remat__grow((void **)&a, &cap, 64, sizeof *a));
    ck_assert_uint_eq(cap, 64);            /* enough already: no growth */
    ck_assert(remat__grow((void **)&a, &cap, 1000, sizeof *a));
    ck_assert_uint_eq(cap, 1024);          /* 64 doubled four times */
    a[999] = 7;
    int *before = a;
    ck_assert(!remat__grow((void **)&a, &cap, SIZE_MAX / 2, sizeof *a)); /* bytes overflow size_t */
    ck_assert(!remat__grow((void **)&a, &cap, SIZE_MAX, 1));             /* doubling overflows */
    ck_assert(a == before && cap == 1024 && a[999] == 7);                /* unchanged on refusal */
    remat__free(a);
}
END_TEST

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

START_TEST(write_should_replace_a_symlinks_target_and_keep_the_link)
{
    /* The link lives in one directory, its target in another: the target is
     * replaced through a temporary file in its own directory, and the link
     * still points at it. */
    char dir[] = "/tmp/remat-util-XXXXXX", a[64], b[64], link[96], target[96], cmd[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    ck_assert_int_eq(mkdir(a, 0755), 0);
    ck_assert_int_eq(mkdir(b, 0755), 0);
    snprintf(target, sizeof target, "%s/real.json", b);
    snprintf(link, sizeof link, "%s/link.json", a);
    write_under(target, "old", 022);
    ck_assert_int_eq(symlink("../b/real.json", link), 0);
    write_under(link, "new", 022);
    struct stat st;
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    read_back(target, "new");
    snprintf(cmd, sizeof cmd, "test $(ls -A %s %s | grep -c [.]tmp[.]) -eq 0", a, b);
    ck_assert_int_eq(system(cmd), 0);
    /* A dangling link: the file it names is created. */
    unlink(target);
    write_under(link, "created", 022);
    read_back(target, "created");
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(write_should_write_a_fifo_in_place)
{
    char dir[] = "/tmp/remat-util-XXXXXX", fifo[96], got[96];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(got, sizeof got, "%s/got", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) { /* the reader */
        char cmd[256];
        snprintf(cmd, sizeof cmd, "cat %s > %s", fifo, got);
        _exit(system(cmd) == 0 ? 0 : 1);
    }
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat__write_file_atomic(fifo, "through the fifo", 16, &err), REMAT_OK);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct stat st;
    ck_assert_int_eq(lstat(fifo, &st), 0);
    ck_assert(S_ISFIFO(st.st_mode)); /* not replaced by a regular file */
    read_back(got, "through the fifo");
    unlink(fifo);
    unlink(got);
    rmdir(dir);
}
END_TEST

START_TEST(write_should_refuse_an_empty_name_and_a_directory)
{
    remat_err err;
    remat_err_init(&err);
    ck_assert_int_eq(remat__write_file_atomic("", "x", 1, &err), REMAT_EINVAL);
    ck_assert_msg_contains(&err, "the output path is empty");
    remat_err_init(&err);
    ck_assert_int_eq(remat__write_file_atomic("/tmp", "x", 1, &err), REMAT_EIO);
    ck_assert_msg_contains(&err, "/tmp: is a directory");
}
END_TEST

/* ---- double to integer ------------------------------------------------ */

START_TEST(u64_from_double_should_be_defined_for_every_double)
{
    /* Each edge of the cast's undefined range (C11 6.3.1.4), by hand. */
    ck_assert_uint_eq(remat__u64_from_double(NAN), 0);
    ck_assert_uint_eq(remat__u64_from_double(-1.0), 0);
    ck_assert_uint_eq(remat__u64_from_double(-INFINITY), 0);
    ck_assert_uint_eq(remat__u64_from_double(0.75), 0);
    ck_assert_uint_eq(remat__u64_from_double(4096.9), 4096);
    ck_assert_uint_eq(remat__u64_from_double(9223372036854775808.0), 9223372036854775808ULL); /* 2^63 */
    /* The largest double below 2^64 is 2^64 - 2048. */
    ck_assert_uint_eq(remat__u64_from_double(18446744073709549568.0), 18446744073709549568ULL);
    ck_assert_uint_eq(remat__u64_from_double(18446744073709551616.0), UINT64_MAX); /* 2^64 */
    ck_assert_uint_eq(remat__u64_from_double((double)UINT64_MAX), UINT64_MAX);   /* rounds to 2^64 */
    ck_assert_uint_eq(remat__u64_from_double(1e300), UINT64_MAX);
    ck_assert_uint_eq(remat__u64_from_double(INFINITY), UINT64_MAX);
    uint64_t v = 7;
    ck_assert(!remat__u64_from_double_checked(1.5, &v));
    ck_assert(!remat__u64_from_double_checked(-1.0, &v));
    ck_assert(!remat__u64_from_double_checked(NAN, &v));
    ck_assert(!remat__u64_from_double_checked(18446744073709551616.0, &v));
    ck_assert_uint_eq(v, 7);
    ck_assert(remat__u64_from_double_checked(9007199254740992.0, &v));
    ck_assert_uint_eq(v, 9007199254740992ULL);
}
END_TEST

/* ---- UTF-8 and JSON strings ---------------------------------------------- */

START_TEST(utf8_should_accept_rfc3629_and_refuse_the_rest)
{
    /* Valid: ASCII, U+00E9, U+20AC, U+1F600, U+10FFFF. */
    ck_assert_uint_eq(remat__utf8_invalid_at("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf"), SIZE_MAX);
    ck_assert_uint_eq(remat__utf8_invalid_at("ab\xc0\xaf"), 2);         /* overlong '/' */
    ck_assert_uint_eq(remat__utf8_invalid_at("\xe0\x80\xaf"), 0);      /* overlong, 3 bytes */
    ck_assert_uint_eq(remat__utf8_invalid_at("x\xed\xa0\x80"), 1);     /* surrogate U+D800 */
    ck_assert_uint_eq(remat__utf8_invalid_at("\xf4\x90\x80\x80"), 0); /* above U+10FFFF */
    ck_assert_uint_eq(remat__utf8_invalid_at("\xff"), 0);
    ck_assert_uint_eq(remat__utf8_invalid_at("ok\x80"), 2);              /* a lone continuation */
    ck_assert_uint_eq(remat__utf8_invalid_at("\xe2\x82"), 0);           /* cut short by the NUL */
    /* Length-bounded: a sequence cut by the end of the buffer, a NUL inside. */
    ck_assert_uint_eq(remat__utf8_invalid_at_n("ab\xe2\x82\xac", 4), 2);
    ck_assert_uint_eq(remat__utf8_invalid_at_n("a\0b", 3), SIZE_MAX);
}
END_TEST

START_TEST(json_chars_should_escape_controls_and_replace_invalid_bytes)
{
    remat_buf b;
    remat_buf_init(&b);
    remat_buf_json_str(&b, "q\"\\\n\x1b[31m\x7f\xc3\xa9\xff!");
    ck_assert(!b.failed);
    ck_assert_str_eq(b.data, "\"q\\\"\\\\\\n\\u001b[31m\\u007f\xc3\xa9\\ufffd!\"");
    remat_buf_destroy(&b);
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
    tcase_add_test(w, grow_should_double_to_the_need_and_refuse_overflow);
    tcase_add_test(w, write_should_create_files_with_the_mode_the_umask_allows);
    tcase_add_test(w, write_should_keep_the_mode_of_a_file_it_replaces);
    tcase_add_test(w, write_should_leave_nothing_when_it_cannot_write);
    tcase_add_test(w, write_should_replace_a_symlinks_target_and_keep_the_link);
    tcase_add_test(w, write_should_write_a_fifo_in_place);
    tcase_add_test(w, write_should_refuse_an_empty_name_and_a_directory);
    suite_add_tcase(s, w);
    TCase *d = tcase_create("convert");
    tcase_add_test(d, u64_from_double_should_be_defined_for_every_double);
    tcase_add_test(d, utf8_should_accept_rfc3629_and_refuse_the_rest);
    tcase_add_test(d, json_chars_should_escape_controls_and_replace_invalid_bytes);
    suite_add_tcase(s, d);
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
