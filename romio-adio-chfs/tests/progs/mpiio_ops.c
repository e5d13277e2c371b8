/*
 * mpiio_ops.c — file-level MPI-IO operations on one file, for the ad_chfs integration tests.
 *
 * Usage: mpiexec -n N mpiio_ops OP FILE [ARG]
 *   set-size FILE        create, MPI_File_set_size to 1 MiB + 5, shrink to 4097, preallocate
 *                        to 64 KiB (grows), preallocate to 100 (no change); get_size checks each
 *   delete FILE          create and write, close, MPI_File_delete, then open without CREATE
 *                        must fail with MPI_ERR_NO_SUCH_FILE
 *   open-missing FILE    open without CREATE must fail with MPI_ERR_NO_SUCH_FILE
 *   excl FILE            FILE exists: CREATE|EXCL must fail with MPI_ERR_FILE_EXISTS; a fresh
 *                        name FILE.new must succeed with CREATE|EXCL
 *   append FILE          FILE exists with S bytes: open with APPEND puts the individual file
 *                        pointer at S; writing there appends
 *   delete-on-close FILE CREATE|DELETE_ON_CLOSE: the file is gone after MPI_File_close
 *   rdonly FILE          FILE exists: a RDONLY handle refuses writes (MPI_ERR_READ_ONLY or
 *                        MPI_ERR_ACCESS), reads work
 *   chunk-hint FILE SIZE create with hint chfs_chunk_size=SIZE (checked natively by the test)
 *   bad-hint FILE        chfs_chunk_size=banana must fail with MPI_ERR_INFO_VALUE
 *   atomic FILE          MPI_File_set_atomicity(1) must fail with MPI_ERR_UNSUPPORTED_OPERATION
 *   dead-server FILE     FILE (1 MiB, striped over every server) lost a server: opening and
 *                        reading it all must fail with MPI_ERR_IO, not hang
 *   self-create FILE     every rank opens the new FILE alone (MPI_COMM_SELF, CREATE|WRONLY) at
 *                        once and writes 64 KiB of byte rank+1 at rank*64 KiB (checked natively)
 *   create-no-dir FILE   CREATE in a directory that does not exist must fail with
 *                        MPI_ERR_NO_SUCH_FILE, as on a local file system
 *
 * Prints "OP ok" from rank 0 or one line per failure naming the expectation; exit status 0 on
 * success. Error-class checks also print the error string, which must mention CHFS.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, failed;

static void expect(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "rank %d: expectation failed: %s\n", rank, what);
        failed = 1;
    }
}

static void must(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "rank %d: %s failed: %s\n", rank, what, msg);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* rc must be an error of class want (or want2); errors raised by the driver (not by ROMIO's
 * argument checks) must also carry a message naming CHFS. */
static int from_driver = 1;

static void expect_class(int rc, int want, int want2, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len, cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) {
        MPI_Error_class(rc, &cls);
        MPI_Error_string(rc, msg, &len);
    }
    if (cls != want && cls != want2) {
        fprintf(stderr, "rank %d: %s: got error class %d (%s), expected %d\n", rank, what, cls,
                msg, want);
        failed = 1;
    } else if (rank == 0) {
        printf("%s -> class %d: %s\n", what, cls, msg);
        if (from_driver && !strstr(msg, "CHFS")) {
            fprintf(stderr, "error message does not name CHFS: %s\n", msg);
            failed = 1;
        }
    }
}

static MPI_Offset size_of(MPI_File fh)
{
    MPI_Offset s = -1;
    must(MPI_File_get_size(fh, &s), "MPI_File_get_size");
    return s;
}

int main(int argc, char **argv)
{
    MPI_File fh;
    MPI_Status st;
    char buf[4096];
    const char *op, *path;
    char other[4096];
    int rc;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc < 3) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiio_ops OP FILE [ARG]\n");
        MPI_Finalize();
        return 64;
    }
    op = argv[1];
    path = argv[2];
    MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN);
    memset(buf, 'x', sizeof(buf));

    if (!strcmp(op, "set-size")) {
        must(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                           &fh), "open");
        must(MPI_File_set_size(fh, 1048581), "set_size grow");
        expect(size_of(fh) == 1048581, "size 1048581 after set_size");
        must(MPI_File_set_size(fh, 4097), "set_size shrink");
        expect(size_of(fh) == 4097, "size 4097 after shrinking set_size");
        must(MPI_File_preallocate(fh, 65536), "preallocate 64 KiB");
        expect(size_of(fh) == 65536, "size 65536 after preallocate");
        must(MPI_File_preallocate(fh, 100), "preallocate 100");
        expect(size_of(fh) == 65536, "preallocate below the size keeps the size");
        must(MPI_File_close(&fh), "close");
    } else if (!strcmp(op, "delete")) {
        must(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY,
                           MPI_INFO_NULL, &fh), "open");
        must(MPI_File_write_at(fh, (MPI_Offset) rank * 4096, buf, 4096, MPI_BYTE, &st), "write");
        must(MPI_File_close(&fh), "close");
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            must(MPI_File_delete(path, MPI_INFO_NULL), "MPI_File_delete");
        MPI_Barrier(MPI_COMM_WORLD);
        rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
        expect_class(rc, MPI_ERR_NO_SUCH_FILE, MPI_ERR_NO_SUCH_FILE, "open after delete");
        if (rank == 0) {
            rc = MPI_File_delete(path, MPI_INFO_NULL);
            expect_class(rc, MPI_ERR_NO_SUCH_FILE, MPI_ERR_NO_SUCH_FILE, "delete of missing");
        }
    } else if (!strcmp(op, "self-create")) {
        static char block[65536];
        memset(block, rank + 1, sizeof(block));
        must(MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL,
                           &fh), "independent CREATE open");
        must(MPI_File_write_at(fh, (MPI_Offset) rank * (MPI_Offset) sizeof(block), block,
                               (int) sizeof(block), MPI_BYTE, MPI_STATUS_IGNORE), "write_at");
        must(MPI_File_close(&fh), "close");
    } else if (!strcmp(op, "create-no-dir")) {
        rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                           &fh);
        expect_class(rc, MPI_ERR_NO_SUCH_FILE, MPI_ERR_NO_SUCH_FILE, "CREATE in a missing directory");
    } else if (!strcmp(op, "open-missing")) {
        rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
        expect_class(rc, MPI_ERR_NO_SUCH_FILE, MPI_ERR_NO_SUCH_FILE, "open missing file");
    } else if (!strcmp(op, "excl")) {
        rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_RDWR,
                           MPI_INFO_NULL, &fh);
        expect_class(rc, MPI_ERR_FILE_EXISTS, MPI_ERR_FILE_EXISTS, "EXCL on existing file");
        snprintf(other, sizeof(other), "%s.new", path);
        must(MPI_File_open(MPI_COMM_WORLD, other, MPI_MODE_CREATE | MPI_MODE_EXCL |
                           MPI_MODE_RDWR, MPI_INFO_NULL, &fh), "EXCL on a new name");
        must(MPI_File_close(&fh), "close");
    } else if (!strcmp(op, "append")) {
        MPI_Offset before, pos;
        must(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_APPEND, MPI_INFO_NULL,
                           &fh), "open APPEND");
        before = size_of(fh);
        must(MPI_File_get_position(fh, &pos), "get_position");
        expect(pos == before, "APPEND puts the file pointer at the end of file");
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            must(MPI_File_write(fh, "appended", 8, MPI_BYTE, &st), "write at end");
        must(MPI_File_sync(fh), "sync");
        MPI_Barrier(MPI_COMM_WORLD);
        must(MPI_File_sync(fh), "sync");
        expect(size_of(fh) == before + 8, "appending write grows the file by 8");
        must(MPI_File_close(&fh), "close");
    } else if (!strcmp(op, "delete-on-close")) {
        must(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR |
                           MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh), "open");
        must(MPI_File_write_at(fh, (MPI_Offset) rank * 4096, buf, 4096, MPI_BYTE, &st), "write");
        must(MPI_File_close(&fh), "close");
        rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
        expect_class(rc, MPI_ERR_NO_SUCH_FILE, MPI_ERR_NO_SUCH_FILE, "open after DELETE_ON_CLOSE");
    } else if (!strcmp(op, "rdonly")) {
        must(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh), "open");
        rc = MPI_File_write_at(fh, 0, buf, 16, MPI_BYTE, &st);
        from_driver = 0;        /* ROMIO refuses this before the driver is called */
        expect_class(rc, MPI_ERR_READ_ONLY, MPI_ERR_ACCESS, "write to RDONLY handle");
        must(MPI_File_read_at(fh, 0, buf, 16, MPI_BYTE, &st), "read RDONLY");
        must(MPI_File_close(&fh), "close");
    } else if (!strcmp(op, "chunk-hint") && argc == 4) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "chfs_chunk_size", argv[3]);
        must(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_EXCL |
                           MPI_MODE_WRONLY, info, &fh), "open with chfs_chunk_size");
        must(MPI_File_write_at_all(fh, (MPI_Offset) rank * 4096, buf, 4096, MPI_BYTE, &st),
             "write_at_all");
        must(MPI_File_close(&fh), "close");
        MPI_Info_free(&info);
    } else if (!strcmp(op, "bad-hint")) {
        MPI_Info info;
        MPI_Info_create(&info);
        MPI_Info_set(info, "chfs_chunk_size", "banana");
        rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh);
        expect_class(rc, MPI_ERR_INFO_VALUE, MPI_ERR_INFO_VALUE, "chfs_chunk_size=banana");
        MPI_Info_free(&info);
    } else if (!strcmp(op, "atomic")) {
        must(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                           &fh), "open");
        rc = MPI_File_set_atomicity(fh, 1);
        expect_class(rc, MPI_ERR_UNSUPPORTED_OPERATION, MPI_ERR_UNSUPPORTED_OPERATION,
                     "set_atomicity(1)");
        must(MPI_File_close(&fh), "close");
    } else if (!strcmp(op, "dead-server")) {
        static char big[1 << 20];
        rc = MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
        if (rc == MPI_SUCCESS) {
            rc = MPI_File_read_at(fh, 0, big, (int) sizeof(big), MPI_BYTE, &st);
            MPI_File_close(&fh);
        }
        expect_class(rc, MPI_ERR_IO, MPI_ERR_IO, "read with a dead server");
    } else {
        if (rank == 0)
            fprintf(stderr, "unknown OP %s\n", op);
        MPI_Finalize();
        return 64;
    }

    int any;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s %s\n", op, any ? "FAILED" : "ok");
    MPI_Finalize();
    return any ? 1 : 0;
}
