/* mpi_comm.c — the communication-heavy application row of `chfs-job bench`: ITERS one-byte
 * ping-pongs between ranks 0 and 1, then ITERS 8-double allreduces over all ranks. Prints the
 * mean round trip and allreduce time (rank 0). No file I/O: what a method costs here is its
 * cost on sockets/shared memory and at start-up, the "comm" kind auto tells MPI programs by. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int iters = argc > 1 ? atoi(argv[1]) : 10000;
	if (iters < 1) {
		if (rank == 0)
			fprintf(stderr, "usage: chfs-job-mpi-comm [ITERS >= 1]\n");
		MPI_Finalize();
		return 2;
	}
	char b = 0;
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = MPI_Wtime();
	for (int i = 0; i < iters && size > 1; i++) {
		if (rank == 0) {
			MPI_Send(&b, 1, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
			MPI_Recv(&b, 1, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else if (rank == 1) {
			MPI_Recv(&b, 1, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(&b, 1, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
		}
	}
	double t1 = MPI_Wtime();
	double in[8], out[8];
	for (int i = 0; i < 8; i++)
		in[i] = rank + i;
	for (int i = 0; i < iters; i++)
		MPI_Allreduce(in, out, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	double t2 = MPI_Wtime();
	if (rank == 0)
		printf("pingpong_us %.3f allreduce_us %.3f ranks %d\n", (t1 - t0) * 1e6 / iters,
		       (t2 - t1) * 1e6 / iters, size);
	MPI_Finalize();
	return 0;
}
