/*
 * h5_2d.c — parallel HDF5 (Debian's libhdf5-mpich, MPI-IO driver) on top of ad_chfs.
 *
 * Usage: mpiexec -n N h5_2d FILE [NX NY]
 * Creates FILE (e.g. chfs:/h5/a.h5) with a 2-D NX x NY dataset of doubles, each rank writing a
 * block of rows with a collective transfer (H5FD_MPIO_COLLECTIVE); closes it; reopens it read-
 * only and has each rank read a block of COLUMNS (a different decomposition, so every value
 * crosses ranks), collectively, checking every value: A[i][j] = i * NY + j + 0.5. Rank 0 also
 * reads the whole dataset independently and checks it. Prints one line; exit 1 on mismatch.
 */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define VALUE(i, j, ny) ((double) (i) * (ny) + (j) + 0.5)

static int rank, nprocs;

static void die(const char *what)
{
    fprintf(stderr, "rank %d: %s failed\n", rank, what);
    H5Eprint2(H5E_DEFAULT, stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static hid_t file_access(void)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL) < 0)
        die("H5Pset_fapl_mpio");
    return fapl;
}

static hid_t collective(void)
{
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    if (dxpl < 0 || H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE) < 0)
        die("H5Pset_dxpl_mpio");
    return dxpl;
}

static long check(const double *buf, hsize_t r0, hsize_t nr, hsize_t c0, hsize_t nc, hsize_t ny)
{
    long bad = 0;
    for (hsize_t i = 0; i < nr; i++)
        for (hsize_t j = 0; j < nc; j++) {
            double want = VALUE(r0 + i, c0 + j, ny), got = buf[i * nc + j];
            if (got != want && bad++ < 5)
                fprintf(stderr, "rank %d: A[%llu][%llu] = %g, expected %g\n", rank,
                        (unsigned long long) (r0 + i), (unsigned long long) (c0 + j), got, want);
        }
    return bad;
}

int main(int argc, char **argv)
{
    hsize_t dims[2], start[2], count[2];
    hid_t fapl, file, space, mspace, dset, dxpl;
    double *buf;
    long bad = 0, all_bad;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc != 2 && argc != 4) {
        if (rank == 0)
            fprintf(stderr, "usage: h5_2d FILE [NX NY]\n");
        MPI_Finalize();
        return 64;
    }
    dims[0] = argc == 4 ? strtoull(argv[2], NULL, 10) : 256;
    dims[1] = argc == 4 ? strtoull(argv[3], NULL, 10) : 192;
    if (dims[0] % nprocs || dims[1] % nprocs) {
        if (rank == 0)
            fprintf(stderr, "NX and NY must be multiples of the number of ranks\n");
        MPI_Finalize();
        return 64;
    }

    /* Write: rank r owns rows [r*NX/N, (r+1)*NX/N). */
    fapl = file_access();
    file = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (file < 0)
        die("H5Fcreate");
    space = H5Screate_simple(2, dims, NULL);
    dset = H5Dcreate2(file, "A", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (dset < 0)
        die("H5Dcreate2");
    count[0] = dims[0] / nprocs; count[1] = dims[1];
    start[0] = rank * count[0]; start[1] = 0;
    buf = malloc(sizeof(double) * count[0] * count[1]);
    for (hsize_t i = 0; i < count[0]; i++)
        for (hsize_t j = 0; j < count[1]; j++)
            buf[i * count[1] + j] = VALUE(start[0] + i, j, dims[1]);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
    mspace = H5Screate_simple(2, count, NULL);
    dxpl = collective();
    if (H5Dwrite(dset, H5T_NATIVE_DOUBLE, mspace, space, dxpl, buf) < 0)
        die("H5Dwrite (collective)");
    H5Pclose(dxpl); H5Sclose(mspace); H5Sclose(space); H5Dclose(dset); H5Fclose(file);
    H5Pclose(fapl);
    free(buf);

    /* Read: rank r reads columns [r*NY/N, (r+1)*NY/N) of every row. */
    fapl = file_access();
    file = H5Fopen(argv[1], H5F_ACC_RDONLY, fapl);
    if (file < 0)
        die("H5Fopen");
    dset = H5Dopen2(file, "A", H5P_DEFAULT);
    space = H5Dget_space(dset);
    count[0] = dims[0]; count[1] = dims[1] / nprocs;
    start[0] = 0; start[1] = rank * count[1];
    buf = calloc(count[0] * count[1], sizeof(double));
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
    mspace = H5Screate_simple(2, count, NULL);
    dxpl = collective();
    if (H5Dread(dset, H5T_NATIVE_DOUBLE, mspace, space, dxpl, buf) < 0)
        die("H5Dread (collective)");
    bad += check(buf, start[0], count[0], start[1], count[1], dims[1]);
    H5Pclose(dxpl); H5Sclose(mspace); free(buf);

    if (rank == 0) {    /* the whole dataset, independently */
        buf = calloc(dims[0] * dims[1], sizeof(double));
        if (H5Dread(dset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)
            die("H5Dread (whole)");
        bad += check(buf, 0, dims[0], 0, dims[1], dims[1]);
        free(buf);
    }
    H5Sclose(space); H5Dclose(dset); H5Fclose(file); H5Pclose(fapl);

    MPI_Allreduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("h5_2d %s %llux%llu on %d ranks: %s (%ld bad values)\n", argv[1],
               (unsigned long long) dims[0], (unsigned long long) dims[1], nprocs,
               all_bad ? "FAILED" : "ok", all_bad);
    MPI_Finalize();
    return all_bad ? 1 : 0;
}
