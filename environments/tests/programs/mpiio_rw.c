/* mpiio_rw — every rank writes its block of one shared file with MPI-IO, reads it back.
 *
 * Usage: mpiexec -n N mpiio_rw INPUT TARGET
 * The input is split into N contiguous blocks; rank r writes block r at its offset with
 * MPI_File_write_at_all, the file is closed and reopened, and every rank reads its block back
 * with MPI_File_read_at_all. Rank 0 prints "written <fnv64> read <fnv64> bytes <n> <n>" over
 * the whole file (blocks gathered in rank order). TARGET is an ordinary name: the mpiio
 * environment's ROMIO_FSTYPE_FORCE=chfs: sends it to ad_chfs, i.e. into CHFS.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
	while (n--)
		h = (h ^ *p++) * 1099511628211ull;
	return h;
}

static void check(int rc, const char *what)
{
	if (rc != MPI_SUCCESS) {
		char msg[MPI_MAX_ERROR_STRING];
		int len;
		MPI_Error_string(rc, msg, &len);
		fprintf(stderr, "mpiio_rw: %s: %s\n", what, msg);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc != 3) {
		if (rank == 0)
			fprintf(stderr, "usage: mpiio_rw INPUT TARGET\n");
		MPI_Finalize();
		return 2;
	}
	FILE *f = fopen(argv[1], "rb");
	if (!f || fseek(f, 0, SEEK_END) != 0) {
		fprintf(stderr, "mpiio_rw: cannot read %s\n", argv[1]);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	long total = ftell(f);
	long per = (total + size - 1) / size;
	long off = per * rank, len = off >= total ? 0 : (off + per > total ? total - off : per);
	unsigned char *mine = malloc((size_t)per + 1), *back = malloc((size_t)per + 1);
	fseek(f, off, SEEK_SET);
	if ((long)fread(mine, 1, (size_t)len, f) != len) {
		fprintf(stderr, "mpiio_rw: short read of %s\n", argv[1]);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	fclose(f);

	MPI_File fh;
	MPI_Status st;
	check(MPI_File_open(MPI_COMM_WORLD, argv[2], MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh),
	      "open for writing");
	check(MPI_File_write_at_all(fh, off, mine, (int)len, MPI_BYTE, &st), "write_at_all");
	check(MPI_File_close(&fh), "close");
	check(MPI_File_open(MPI_COMM_WORLD, argv[2], MPI_MODE_RDONLY, MPI_INFO_NULL, &fh),
	      "open for reading");
	check(MPI_File_read_at_all(fh, off, back, (int)len, MPI_BYTE, &st), "read_at_all");
	check(MPI_File_close(&fh), "close");

	/* Rank 0 hashes all blocks in rank order: what was written, and what came back. */
	unsigned char *all_w = NULL, *all_r = NULL;
	int *counts = NULL, *displs = NULL, ilen = (int)len;
	if (rank == 0) {
		all_w = malloc((size_t)total + 1);
		all_r = malloc((size_t)total + 1);
		counts = malloc(sizeof(int) * (size_t)size);
		displs = malloc(sizeof(int) * (size_t)size);
	}
	MPI_Gather(&ilen, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
	if (rank == 0)
		for (int i = 0, d = 0; i < size; d += counts[i], i++)
			displs[i] = d;
	MPI_Gatherv(mine, ilen, MPI_BYTE, all_w, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
	MPI_Gatherv(back, ilen, MPI_BYTE, all_r, counts, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		uint64_t h0 = 14695981039346656037ull;
		printf("written %016llx read %016llx bytes %ld %ld\n",
		       (unsigned long long)fnv(h0, all_w, (size_t)total),
		       (unsigned long long)fnv(h0, all_r, (size_t)total), total, total);
	}
	MPI_Finalize();
	return 0;
}
