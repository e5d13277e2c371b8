/*
 * chfs_cat.c — read a CHFS file through the native API (chfs.h), to check what MPI-IO wrote.
 *
 * Usage: chfs_cat PATH               write the file's bytes to stdout
 *        chfs_cat --chunk-size PATH  print the file's chunk size
 *        chfs_cat --size PATH        print the file's size (chfs_stat)
 * The pool comes from CHFS_SERVER (and the other CHFS_* variables). Exit status 1 with one line
 * on stderr if the file cannot be read (2 if it does not exist).
 */
#include <chfs.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static int fail(const char *what, const char *path)
{
    int err = errno;
    fprintf(stderr, "chfs_cat: %s %s: %s\n", what, path, strerror(err));
    chfs_term();
    return err == ENOENT ? 2 : 1;
}

int main(int argc, char **argv)
{
    const char *mode = argc == 3 ? argv[1] : "", *path = argv[argc - 1];
    static char buf[1 << 20];
    off_t off = 0;
    ssize_t n;
    int fd;

    if (argc < 2 || argc > 3 || !strcmp(argv[1], "--help")) {
        fprintf(stderr, "usage: chfs_cat [--chunk-size|--size] PATH\n");
        return 64;
    }
    if (chfs_init(NULL) != 0) {
        fprintf(stderr, "chfs_cat: cannot join the CHFS pool: %s\n", strerror(errno));
        return 1;
    }
    if (!strcmp(mode, "--size")) {
        struct stat st;
        if (chfs_stat(path, &st) != 0)
            return fail("stat", path);
        printf("%lld\n", (long long) st.st_size);
        chfs_term();
        return 0;
    }
    fd = chfs_open(path, O_RDONLY);
    if (fd < 0)
        return fail("open", path);
    if (!strcmp(mode, "--chunk-size")) {
        int cs = chfs_chunk_size_of(fd);
        if (cs < 0)
            return fail("chunk size of", path);
        printf("%d\n", cs);
    } else {
        while ((n = chfs_pread(fd, buf, sizeof(buf), off)) > 0) {
            if (fwrite(buf, 1, (size_t) n, stdout) != (size_t) n)
                return fail("write stdout for", path);
            off += n;
        }
        if (n < 0)
            return fail("read", path);
    }
    chfs_close(fd);
    chfs_term();
    return 0;
}
