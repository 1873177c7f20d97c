/*
 * output.c - writing an output document: atomically where that is safe, in
 * place where replacing would do harm.
 *
 * A regular file (or a name that does not exist yet) is written to a
 * temporary sibling, fsync'd and renamed over it, so a failed run never
 * leaves a truncated file. Renaming over anything else would be a disaster:
 * run as root, `-o /dev/null` used to replace the system's /dev/null with a
 * regular file. So symbolic links are followed first (the regular file they
 * name is replaced in its own directory, the link stays a link), and what is
 * not a regular file - a character or block device, a FIFO, a socket - is
 * opened and written directly, as `cat > X` would. The names of descriptors
 * (/dev/stdout, /dev/fd/N, /proc/...) are always written in place, and when one is this process's own stdout or stderr
 * the document goes through that stream, so it keeps its order with the
 * lines printed around it.
 */
#define _POSIX_C_SOURCE 200809L
#include "util_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Symbolic links followed before giving up, as the kernel's own limit. */
#define MAX_LINK_HOPS 40

static int has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* Names that stand for a descriptor (the kernel's "magic" links, whose
 * readlink text may be "pipe:[123]", no path at all). */
static int names_a_descriptor(const char *p)
{
    return has_prefix(p, "/proc/") || has_prefix(p, "/dev/fd/") || has_prefix(p, "/dev/std");
}

/* Follows path's chain of symbolic links to the name at its end (which may
 * not exist: a dangling link's target is created). *direct is set when a
 * name on the way stands for a descriptor. Returns a malloc'd path or NULL
 * with errno set (ENOMEM, ELOOP, or lstat/readlink's). */
static char *resolve_links(const char *path, int *direct)
{
    char *cur = remat__strdup(path);
    if (!cur) {
        errno = ENOMEM;
        return NULL;
    }
    for (int hop = 0; hop <= MAX_LINK_HOPS; hop++) {
        if (names_a_descriptor(cur)) {
            *direct = 1;
            return cur;
        }
        struct stat st;
        if (lstat(cur, &st) != 0) {
            if (errno == ENOENT)
                return cur; /* a new file (or a dangling link's target) */
            goto fail;
        }
        if (!S_ISLNK(st.st_mode))
            return cur;
        char target[PATH_MAX];
        ssize_t n = readlink(cur, target, sizeof target - 1);
        if (n < 0)
            goto fail;
        target[n] = '\0';
        char *next;
        const char *slash = strrchr(cur, '/');
        if (target[0] == '/' || !slash) {
            next = remat__strdup(target);
        } else { /* relative to the link's own directory */
            size_t dlen = (size_t)(slash - cur) + 1;
            next = remat__malloc(dlen + (size_t)n + 1);
            if (next) {
                memcpy(next, cur, dlen);
                memcpy(next + dlen, target, (size_t)n + 1);
            }
        }
        if (!next) {
            errno = ENOMEM;
            goto fail;
        }
        remat__free(cur);
        cur = next;
    }
    errno = ELOOP;
fail:;
    int saved = errno;
    remat__free(cur);
    errno = saved;
    return NULL;
}

static int write_all(int fd, const char *data, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return 0;
        }
        done += (size_t)w;
    }
    return 1;
}

static remat_status write_stream(FILE *f, const char *name, const char *data, size_t len, remat_err *err)
{
    if (fwrite(data, 1, len, f) != len || fflush(f) != 0)
        return remat_err_set(err, REMAT_EIO, "%s: write failed: %s", name, strerror(errno));
    return REMAT_OK;
}

/* Writes a device, a FIFO or a descriptor's name in place. */
static remat_status write_direct(const char *shown, const char *path, const char *data, size_t len, remat_err *err)
{
    struct stat st, fdst;
    if (stat(path, &st) == 0) {
        /* This process's own stdout or stderr: through its stream. */
        if (fstat(STDOUT_FILENO, &fdst) == 0 && fdst.st_dev == st.st_dev && fdst.st_ino == st.st_ino)
            return write_stream(stdout, shown, data, len, err);
        if (fstat(STDERR_FILENO, &fdst) == 0 && fdst.st_dev == st.st_dev && fdst.st_ino == st.st_ino)
            return write_stream(stderr, shown, data, len, err);
    }
    /* A regular file reached through a descriptor's name is rewritten
     * whole; a device or a FIFO cannot be truncated or created. */
    int fd = open(path, O_WRONLY | O_CLOEXEC | (stat(path, &st) == 0 && S_ISREG(st.st_mode) ? O_TRUNC : 0));
    if (fd < 0)
        return remat_err_set(err, REMAT_EIO, "%s: cannot open for writing: %s", shown, strerror(errno));
    int ok = write_all(fd, data, len);
    int saved = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (!ok)
        return remat_err_set(err, REMAT_EIO, "%s: write failed: %s", shown, strerror(saved));
    return REMAT_OK;
}

/* Creates path's temporary sibling "path.tmp.XXXXXX" exclusively. mkstemp
 * would make it 0600, and rename would give the output that mode; opened
 * with 0666 the file gets what the umask allows, like any file the user's
 * tools create. The name's letters come from the clock, the process and a
 * counter; a name that exists already is just tried again. */
static int create_temp(char *tmp, size_t plen)
{
    static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 16) ^ (uint64_t)(uintptr_t)tmp;
    for (int attempt = 0; attempt < 100; attempt++) {
        x = remat__fnv1a(x, &attempt, sizeof attempt);
        uint64_t r = x;
        memcpy(tmp + plen, ".tmp.", 5);
        for (int i = 0; i < 6; i++, r /= 62)
            tmp[plen + 5 + i] = letters[r % 62];
        tmp[plen + 11] = '\0';
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

/* Writes a regular file (or a new one) at path, the end of any link chain,
 * through a temporary file in the same directory and a rename. */
static remat_status write_replace(const char *shown, const char *path, const char *data, size_t len, remat_err *err)
{
    size_t plen = strlen(path);
    char *tmp = remat__malloc(plen + 16);
    if (!tmp)
        return remat_err_set(err, REMAT_ENOMEM, "%s: out of memory", shown);
    memcpy(tmp, path, plen);
    int fd = create_temp(tmp, plen);
    if (fd < 0) {
        remat_status st = remat_err_set(err, REMAT_EIO, "%s: cannot create temporary file: %s", shown, strerror(errno));
        remat__free(tmp);
        return st;
    }
    /* Replacing a file keeps its permissions (and the umask does not apply
     * to them, so fchmod rather than the mode given to open). */
    struct stat old;
    int ok = 1;
    if (stat(path, &old) == 0 && S_ISREG(old.st_mode))
        ok = fchmod(fd, old.st_mode & 07777) == 0;
    ok = ok && write_all(fd, data, len) && fsync(fd) == 0;
    int saved = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        saved = errno;
        ok = 0;
    }
    if (!ok) {
        unlink(tmp);
        remat__free(tmp);
        return remat_err_set(err, REMAT_EIO, "%s: write failed: %s", shown, strerror(saved));
    }
    remat__free(tmp);
    return REMAT_OK;
}

remat_status remat__write_file_atomic(const char *path, const char *data, size_t len, remat_err *err)
{
    if (!path[0])
        return remat_err_set(err, REMAT_EINVAL, "the output path is empty (give a file name, or - for stdout)");
    if (strcmp(path, "-") == 0)
        return write_stream(stdout, "stdout", data, len, err);
    int direct = 0;
    char *real = resolve_links(path, &direct);
    if (!real) {
        if (errno == ENOMEM)
            return remat_err_set(err, REMAT_ENOMEM, "%s: out of memory", path);
        return remat_err_set(err, REMAT_EIO, "%s: cannot resolve: %s", path, strerror(errno));
    }
    remat_status st;
    struct stat info;
    if (stat(real, &info) == 0 && S_ISDIR(info.st_mode))
        st = remat_err_set(err, REMAT_EIO, "%s: is a directory", path);
    else if (direct || (stat(real, &info) == 0 && !S_ISREG(info.st_mode)))
        st = write_direct(path, real, data, len, err);
    else
        st = write_replace(path, real, data, len, err);
    remat__free(real);
    return st;
}
