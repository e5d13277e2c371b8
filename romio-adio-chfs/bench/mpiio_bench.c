/*
 * mpiio_bench.c — bandwidth of MPI-IO through ad_chfs next to the native CHFS API, in one run.
 *
 * Usage: mpiexec -n N mpiio_bench DIR BYTES_PER_RANK REPS [XFER...]
 *   DIR             CHFS directory for the files (created), e.g. /bench
 *   BYTES_PER_RANK  data each rank writes then reads per case
 *   REPS            repetitions per case (the best is reported)
 *   XFER            transfer sizes in bytes (default 1048576 65536)
 *
 * Cases, for every transfer size: {native, mpiio-indep, mpiio-coll} x {fpp, shared} x
 * {write, read}. native = chfs_pwrite/chfs_pread in XFER pieces; mpiio-indep =
 * MPI_File_write_at/read_at on "chfs:" names; mpiio-coll = write_at_all/read_at_all. fpp = one
 * file per rank (opened on MPI_COMM_SELF), shared = one file, rank r owning the contiguous
 * range [r*B, (r+1)*B). Every phase is bracketed by barriers and timed as the slowest rank;
 * writes include close (and thus any client flush). The transfers alone are timed too (io_*
 * columns: slowest rank's transfer loop, without open/close), which separates the data path
 * from the collective open/close. Reads verify the first byte of every transfer, so a fast
 * wrong answer cannot pass. Rank 0 prints CSV lines
 * "api,mode,layout,xfer,op,ranks,bytes,seconds,mib_s,io_seconds,io_mib_s" on stdout.
 */
#include <chfs.h>
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nprocs;

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "mpiio_bench: rank %d: %s %s\n", rank, what, detail);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void mpi_check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(rc, msg, &len);
        die(what, msg);
    }
}

enum api { NATIVE, MPIIO_INDEP, MPIIO_COLL };

/* One phase (write or read of the whole per-rank range). Returns the slowest rank's time for
 * the phase (open + transfers + close) and, in *io, for the transfers alone. */
static double run_phase(enum api api, int shared, int write, const char *path, char *buf,
                        long long bytes, long long xfer, double *io)
{
    long long base = shared ? (long long) rank * bytes : 0;
    double t0, t, tio;

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    if (api == NATIVE) {
        int fd;
        if (write && shared) {  /* rank 0 creates, then the others open: ROMIO's protocol */
            fd = rank == 0 ? chfs_create(path, O_WRONLY | O_TRUNC, 0644) : -1;
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank != 0)
                fd = chfs_open(path, O_WRONLY);
        } else if (write) {
            fd = chfs_create(path, O_WRONLY | O_TRUNC, 0644);
        } else {
            fd = chfs_open(path, O_RDONLY);
        }
        if (fd < 0)
            die("native open", strerror(errno));
        tio = MPI_Wtime();
        for (long long off = 0; off < bytes; off += xfer) {
            ssize_t n = write ? chfs_pwrite(fd, buf + off, xfer, base + off)
                              : chfs_pread(fd, buf + off, xfer, base + off);
            if (n != xfer)
                die(write ? "native pwrite" : "native pread", n < 0 ? strerror(errno) : "short");
        }
        tio = MPI_Wtime() - tio;
        if (chfs_close(fd) != 0)
            die("native close", strerror(errno));
    } else {
        MPI_File fh;
        MPI_Status st;
        char name[4096];
        int amode = write ? MPI_MODE_CREATE | MPI_MODE_WRONLY : MPI_MODE_RDONLY;
        snprintf(name, sizeof(name), "chfs:%s", path);
        mpi_check(MPI_File_open(shared ? MPI_COMM_WORLD : MPI_COMM_SELF, name, amode,
                                MPI_INFO_NULL, &fh), "MPI_File_open");
        tio = MPI_Wtime();
        for (long long off = 0; off < bytes; off += xfer) {
            int rc;
            if (api == MPIIO_COLL)
                rc = write ? MPI_File_write_at_all(fh, base + off, buf + off, (int) xfer,
                                                   MPI_BYTE, &st)
                           : MPI_File_read_at_all(fh, base + off, buf + off, (int) xfer,
                                                  MPI_BYTE, &st);
            else
                rc = write ? MPI_File_write_at(fh, base + off, buf + off, (int) xfer, MPI_BYTE,
                                               &st)
                           : MPI_File_read_at(fh, base + off, buf + off, (int) xfer, MPI_BYTE,
                                              &st);
            mpi_check(rc, "MPI-IO transfer");
        }
        tio = MPI_Wtime() - tio;
        mpi_check(MPI_File_close(&fh), "MPI_File_close");
    }
    t = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&tio, io, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return t;
}

static void fill(char *buf, long long bytes, long long xfer, int salt)
{
    for (long long off = 0; off < bytes; off += xfer)
        memset(buf + off, (int) ((off / xfer + rank + salt) % 251) + 1, xfer);
}

static void verify(const char *buf, long long bytes, long long xfer, int salt)
{
    for (long long off = 0; off < bytes; off += xfer)
        if (buf[off] != (char) ((off / xfer + rank + salt) % 251 + 1))
            die("verify", "read back wrong data");
}

int main(int argc, char **argv)
{
    long long bytes, xfers[16];
    int nx = 0, reps, salt = 0;
    char *buf;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 4) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiio_bench DIR BYTES_PER_RANK REPS [XFER...]\n");
        MPI_Finalize();
        return 64;
    }
    bytes = atoll(argv[2]);
    reps = atoi(argv[3]);
    for (int i = 4; i < argc && nx < 16; i++)
        xfers[nx++] = atoll(argv[i]);
    if (nx == 0) {
        xfers[nx++] = 1 << 20;
        xfers[nx++] = 64 << 10;
    }
    for (int i = 0; i < nx; i++)
        if (xfers[i] <= 0 || bytes % xfers[i] != 0 || xfers[i] > (1 << 30))
            die("bad arguments:", "BYTES_PER_RANK must be a multiple of every XFER");
    if (chfs_init(NULL) != 0)
        die("chfs_init:", strerror(errno));
    if (rank == 0 && chfs_mkdir(argv[1], 0755) != 0 && errno != EEXIST)
        die("mkdir", strerror(errno));
    MPI_Barrier(MPI_COMM_WORLD);
    buf = malloc(bytes);

    if (rank == 0)
        printf("api,mode,layout,xfer,op,ranks,bytes,seconds,mib_s,io_seconds,io_mib_s\n");
    for (int x = 0; x < nx; x++)
        for (int shared = 0; shared <= 1; shared++)
            for (int api = NATIVE; api <= MPIIO_COLL; api++) {
                double best[2] = { 1e30, 1e30 }, best_io[2] = { 1e30, 1e30 }, io;
                char path[4096];
                /* The same names for every API (each case deletes its files): CHFS places
                 * chunks by hashing the path, so equal names give equal placement and the
                 * APIs are compared on the same server load. */
                if (shared)
                    snprintf(path, sizeof(path), "%s/shared-%lld", argv[1], xfers[x]);
                else
                    snprintf(path, sizeof(path), "%s/fpp-%lld.%d", argv[1], xfers[x], rank);
                for (int r = 0; r < reps; r++) {
                    double t;
                    salt++;
                    fill(buf, bytes, xfers[x], salt);
                    t = run_phase(api, shared, 1, path, buf, bytes, xfers[x], &io);
                    best[0] = t < best[0] ? t : best[0];
                    best_io[0] = io < best_io[0] ? io : best_io[0];
                    memset(buf, 0, bytes);
                    t = run_phase(api, shared, 0, path, buf, bytes, xfers[x], &io);
                    best[1] = t < best[1] ? t : best[1];
                    best_io[1] = io < best_io[1] ? io : best_io[1];
                    verify(buf, bytes, xfers[x], salt);
                }
                if (rank == 0)
                    for (int w = 0; w < 2; w++) {
                        double total = (double) bytes * nprocs;
                        printf("%s,%s,%s,%lld,%s,%d,%.0f,%.6f,%.1f,%.6f,%.1f\n",
                               api == NATIVE ? "native" : "mpiio",
                               api == MPIIO_COLL ? "coll" : "indep",
                               shared ? "shared" : "fpp", xfers[x], w == 0 ? "write" : "read",
                               nprocs, total, best[w], total / best[w] / 1048576.0, best_io[w],
                               total / best_io[w] / 1048576.0);
                    }
                fflush(stdout);
                MPI_Barrier(MPI_COMM_WORLD);
                if (!shared || rank == 0)
                    chfs_unlink(path);
            }
    free(buf);
    chfs_term();
    MPI_Finalize();
    return 0;
}
