/*
 * mpiio_pattern.c — write a file through MPI-IO with one access pattern, read it back with the
 * same pattern, and verify it in-process. Used by the ad_chfs integration tests.
 *
 * Usage: mpiexec -n N mpiio_pattern MODE[,MODE...] FILE SIZE
 *   MODE: indep        contiguous block per rank, MPI_File_write_at / read_at
 *         coll         contiguous block per rank, MPI_File_write_at_all / read_at_all
 *         indiv-fp     contiguous block per rank, set_view + individual file pointer
 *         vector-indep interleaved blocks (MPI_Type_vector file view), independent I/O
 *         vector-coll  interleaved blocks (MPI_Type_vector file view), collective I/O
 *         subarray     2-D block decomposition (MPI_Type_create_subarray view), collective
 *         nonblocking  MPI_File_iwrite_at / iread_at + MPI_Waitall
 *         nonblocking-coll  MPI_File_iwrite_at_all / iread_at_all + MPI_Wait
 *   SIZE: file size in bytes (a multiple of N * 4096)
 * With several modes (comma-separated), each mode writes its own file FILE-MODE, in one job.
 *
 * Whatever the pattern, byte i of the resulting file is PATTERN(i), so a correct run leaves
 * the same file for every mode and the test can check it through the native API. Each rank
 * reads back exactly what it wrote (through the same view) and compares; the program prints
 * one line and exits non-zero on the first mismatch or MPI error.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATTERN(i) ((unsigned char) (((i) * 131 + 7) % 251))
#define BLOCK 4096

static int rank, nprocs;

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len, cls;
        MPI_Error_class(rc, &cls);
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "rank %d: %s failed (class %d): %s\n", rank, what, cls, msg);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* Fill buf with the bytes this rank owns, in the order the view presents them: the n-th
 * byte of the view is file offset view_offset(n). */
typedef long long (*view_map)(long long n, long long size);

static long long map_block(long long n, long long size)
{
    return rank * (size / nprocs) + n;
}

static long long map_vector(long long n, long long size)
{
    (void) size;        /* blocks of BLOCK bytes dealt round-robin to the ranks */
    return (n / BLOCK) * (long long) BLOCK * nprocs + (long long) rank * BLOCK + n % BLOCK;
}

/* Subarray: the file is a ROWS x COLS byte matrix, rows split over a PR x PC process grid. */
static int grid_r, grid_c, ROWS, COLS;

static long long map_subarray(long long n, long long size)
{
    (void) size;
    int lrows = ROWS / grid_r, lcols = COLS / grid_c;
    int pr = rank / grid_c, pc = rank % grid_c;
    long long r = pr * lrows + n / lcols, c = pc * lcols + n % lcols;
    return r * COLS + c;
}

static void fill(unsigned char *buf, long long n, view_map map, long long size)
{
    for (long long k = 0; k < n; k++)
        buf[k] = PATTERN(map(k, size));
}

static int verify(const unsigned char *buf, long long n, view_map map, long long size)
{
    for (long long k = 0; k < n; k++) {
        long long off = map(k, size);
        if (buf[k] != PATTERN(off)) {
            fprintf(stderr, "rank %d: mismatch at file offset %lld: got %u, want %u\n", rank,
                    off, buf[k], PATTERN(off));
            return 1;
        }
    }
    return 0;
}

/* One mode on one file; returns 1 (on every rank) if any rank saw a mismatch. */
static int run_mode(const char *mode, const char *path, long long size)
{
    MPI_File fh;
    MPI_Status st;
    MPI_Datatype ftype = MPI_DATATYPE_NULL;
    long long mine;
    unsigned char *buf, *back;
    view_map map = map_block;
    int bad = 0, all_bad = 0;

    mine = size / nprocs;
    buf = malloc(mine);
    back = malloc(mine);

    if (!strncmp(mode, "vector", 6)) {
        map = map_vector;
        check(MPI_Type_vector((int) (mine / BLOCK), BLOCK, BLOCK * nprocs, MPI_BYTE, &ftype),
              "MPI_Type_vector");
    } else if (!strcmp(mode, "subarray")) {
        int gsizes[2], lsizes[2], starts[2];
        map = map_subarray;
        grid_r = nprocs % 2 == 0 ? 2 : 1;
        grid_c = nprocs / grid_r;
        COLS = BLOCK / 4 * grid_c;      /* 1 KiB-wide local rows */
        ROWS = (int) (size / COLS);
        gsizes[0] = ROWS; gsizes[1] = COLS;
        lsizes[0] = ROWS / grid_r; lsizes[1] = COLS / grid_c;
        starts[0] = (rank / grid_c) * lsizes[0]; starts[1] = (rank % grid_c) * lsizes[1];
        check(MPI_Type_create_subarray(2, gsizes, lsizes, starts, MPI_ORDER_C, MPI_BYTE, &ftype),
              "MPI_Type_create_subarray");
    }
    if (ftype != MPI_DATATYPE_NULL) {
        MPI_Datatype resized = ftype;
        if (map == map_vector) {        /* each rank's view starts at its first block */
            check(MPI_Type_create_resized(ftype, 0, (MPI_Aint) size, &resized), "resized");
            MPI_Type_free(&ftype);
        }
        ftype = resized;
        check(MPI_Type_commit(&ftype), "MPI_Type_commit");
    }
    fill(buf, mine, map, size);

    check(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
                        &fh), "MPI_File_open");
    if (ftype != MPI_DATATYPE_NULL) {
        MPI_Offset disp = map == map_vector ? (MPI_Offset) rank * BLOCK : 0;
        check(MPI_File_set_view(fh, disp, MPI_BYTE, ftype, "native", MPI_INFO_NULL),
              "MPI_File_set_view");
    }
    MPI_Offset off = ftype != MPI_DATATYPE_NULL ? 0 : (MPI_Offset) rank * mine;
    int n = (int) mine;

    if (!strcmp(mode, "indep") || !strcmp(mode, "vector-indep")) {
        check(MPI_File_write_at(fh, off, buf, n, MPI_BYTE, &st), "MPI_File_write_at");
    } else if (!strcmp(mode, "coll") || !strcmp(mode, "vector-coll")
               || !strcmp(mode, "subarray")) {
        check(MPI_File_write_at_all(fh, off, buf, n, MPI_BYTE, &st), "MPI_File_write_at_all");
    } else if (!strcmp(mode, "indiv-fp")) {
        check(MPI_File_seek(fh, off, MPI_SEEK_SET), "MPI_File_seek");
        check(MPI_File_write(fh, buf, n / 2, MPI_BYTE, &st), "MPI_File_write");
        check(MPI_File_write(fh, buf + n / 2, n - n / 2, MPI_BYTE, &st), "MPI_File_write");
    } else if (!strcmp(mode, "nonblocking")) {
        MPI_Request req[2];
        MPI_Status sts[2];
        check(MPI_File_iwrite_at(fh, off, buf, n / 2, MPI_BYTE, &req[0]), "MPI_File_iwrite_at");
        check(MPI_File_iwrite_at(fh, off + n / 2, buf + n / 2, n - n / 2, MPI_BYTE, &req[1]),
              "MPI_File_iwrite_at");
        check(MPI_Waitall(2, req, sts), "MPI_Waitall");
    } else if (!strcmp(mode, "nonblocking-coll")) {
        MPI_Request req;
        check(MPI_File_iwrite_at_all(fh, off, buf, n, MPI_BYTE, &req), "MPI_File_iwrite_at_all");
        check(MPI_Wait(&req, &st), "MPI_Wait");
    } else {
        if (rank == 0)
            fprintf(stderr, "unknown MODE %s\n", mode);
        MPI_Abort(MPI_COMM_WORLD, 64);
    }
    int count;
    MPI_Get_count(&st, MPI_BYTE, &count);
    if (strncmp(mode, "nonblocking", 11) && strcmp(mode, "indiv-fp") && count != n) {
        fprintf(stderr, "rank %d: status reports %d bytes written, expected %d\n", rank, count, n);
        bad = 1;
    }
    check(MPI_File_sync(fh), "MPI_File_sync");
    MPI_Barrier(MPI_COMM_WORLD);
    check(MPI_File_sync(fh), "MPI_File_sync");

    MPI_Offset fsize;
    check(MPI_File_get_size(fh, &fsize), "MPI_File_get_size");
    if (fsize != size) {
        fprintf(stderr, "rank %d: MPI_File_get_size = %lld, expected %lld\n", rank,
                (long long) fsize, size);
        bad = 1;
    }

    memset(back, 0, mine);
    if (!strncmp(mode, "nonblocking", 11)) {
        MPI_Request req;
        if (!strcmp(mode, "nonblocking-coll"))
            check(MPI_File_iread_at_all(fh, off, back, n, MPI_BYTE, &req), "iread_at_all");
        else
            check(MPI_File_iread_at(fh, off, back, n, MPI_BYTE, &req), "MPI_File_iread_at");
        check(MPI_Wait(&req, &st), "MPI_Wait");
    } else if (!strcmp(mode, "indep") || !strcmp(mode, "vector-indep")) {
        check(MPI_File_read_at(fh, off, back, n, MPI_BYTE, &st), "MPI_File_read_at");
    } else if (!strcmp(mode, "indiv-fp")) {
        check(MPI_File_seek(fh, off, MPI_SEEK_SET), "MPI_File_seek");
        check(MPI_File_read(fh, back, n, MPI_BYTE, &st), "MPI_File_read");
    } else {
        check(MPI_File_read_at_all(fh, off, back, n, MPI_BYTE, &st), "MPI_File_read_at_all");
    }
    MPI_Get_count(&st, MPI_BYTE, &count);
    if (count != n) {
        fprintf(stderr, "rank %d: status reports %d bytes read, expected %d\n", rank, count, n);
        bad = 1;
    }
    bad |= verify(back, mine, map, size);
    check(MPI_File_close(&fh), "MPI_File_close");

    MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("%s %s %lld bytes on %d ranks: %s\n", mode, path, size, nprocs,
               all_bad ? "FAILED" : "ok");
    if (ftype != MPI_DATATYPE_NULL)
        MPI_Type_free(&ftype);
    free(buf);
    free(back);
    return all_bad;
}

int main(int argc, char **argv)
{
    char modes[1024], path[4096], *mode, *save;
    long long size;
    int multi, failed = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc != 4) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiio_pattern MODE[,MODE...] FILE SIZE\n");
        MPI_Finalize();
        return 64;
    }
    size = atoll(argv[3]);
    if (size <= 0 || size % ((long long) nprocs * BLOCK) != 0) {
        if (rank == 0)
            fprintf(stderr, "SIZE must be a positive multiple of %d\n", nprocs * BLOCK);
        MPI_Finalize();
        return 64;
    }
    MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN);
    snprintf(modes, sizeof(modes), "%s", argv[1]);
    multi = strchr(modes, ',') != NULL;
    for (mode = strtok_r(modes, ",", &save); mode; mode = strtok_r(NULL, ",", &save)) {
        if (multi)
            snprintf(path, sizeof(path), "%s-%s", argv[2], mode);
        else
            snprintf(path, sizeof(path), "%s", argv[2]);
        failed |= run_mode(mode, path, size);
    }
    MPI_Finalize();
    return failed ? 1 : 0;
}
