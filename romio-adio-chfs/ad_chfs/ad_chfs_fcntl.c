/*
 * ad_chfs_fcntl.c — file-level control: size, resize, preallocate, sync, atomicity, locks and
 * the feature flags that steer ROMIO's generic code.
 *
 * CHFS has no byte-range locks. Hence: atomic mode is refused with
 * MPI_ERR_UNSUPPORTED_OPERATION (rather than silently not being atomic), shared file pointers
 * are reported unsupported (they need a lock), and data-sieving writes are switched off in
 * ad_chfs_hints.c (their read-modify-write needs a lock). We still report
 * DATA_SIEVING_WRITES so that ROMIO's collective open upgrades WRONLY to RDWR: two-phase
 * writes read the holes of an aggregator's domain before writing it back.
 *
 * Size queries and resize use the descriptor (chfs_fstat/chfs_ftruncate, chfs-stack
 * extensions) so the client's own buffered writes count; against upstream CHFS, which lacks
 * them, the path-based calls are used. Resize and preallocate are done by one rank (ROMIO
 * calls preallocate on rank 0 only; set_size on all, and we let the first aggregator act and
 * broadcast its result). Preallocating extends the file with a hole: CHFS allocates chunks on
 * write, and holes read as zeros.
 */
#include "ad_chfs.h"

#include <errno.h>

static int chfs_size_of(ADIO_File fd, ADIO_Offset *size)
{
    struct stat st;
#ifdef CHFS_STACK_IMPL
    if (chfs_fstat(fd->fd_sys, &st) != 0)
        return -1;
#else
    if (chfs_stat(ADIOI_CHFS_Path(fd->filename), &st) != 0)
        return -1;
#endif
    *size = st.st_size;
    return 0;
}

static int chfs_set_size(ADIO_File fd, ADIO_Offset size)
{
#ifdef CHFS_STACK_IMPL
    return chfs_ftruncate(fd->fd_sys, (off_t) size);
#else
    return chfs_truncate(ADIOI_CHFS_Path(fd->filename), (off_t) size);
#endif
}

void ADIOI_CHFS_Fcntl(ADIO_File fd, int flag, ADIO_Fcntl_t *fcntl_struct, int *error_code)
{
    static char myname[] = "ADIOI_CHFS_FCNTL";
    const char *path = ADIOI_CHFS_Path(fd->filename);
    ADIO_Offset size;

    *error_code = MPI_SUCCESS;
    switch (flag) {
        case ADIO_FCNTL_GET_FSIZE:
            if (chfs_size_of(fd, &size) != 0)
                *error_code = ADIOI_CHFS_Error(myname, "size of", path, errno);
            else
                fcntl_struct->fsize = size;
            break;
        case ADIO_FCNTL_SET_DISKSPACE:
            if (chfs_size_of(fd, &size) != 0)
                *error_code = ADIOI_CHFS_Error(myname, "size of", path, errno);
            else if (fcntl_struct->diskspace > size
                     && chfs_set_size(fd, fcntl_struct->diskspace) != 0)
                *error_code = ADIOI_CHFS_Error(myname, "preallocate", path, errno);
            break;
        case ADIO_FCNTL_SET_ATOMICITY:
            if (fcntl_struct->atomicity) {
                *error_code = MPIO_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, myname,
                                                   __LINE__, MPI_ERR_UNSUPPORTED_OPERATION,
                                                   "**io", "CHFS %s: atomic mode needs "
                                                   "byte-range locks, which CHFS does not have",
                                                   path);
                break;
            }
            fd->atomicity = 0;
            break;
        default:
            *error_code = MPIO_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, myname,
                                               __LINE__, MPI_ERR_ARG, "**flag", "**flag %d",
                                               flag);
            break;
    }
}

void ADIOI_CHFS_Resize(ADIO_File fd, ADIO_Offset size, int *error_code)
{
    static char myname[] = "ADIOI_CHFS_RESIZE";
    int rank, err = 0;

    MPI_Comm_rank(fd->comm, &rank);
    if (rank == fd->hints->ranklist[0] && chfs_set_size(fd, size) != 0)
        err = errno ? errno : EIO;
    MPI_Bcast(&err, 1, MPI_INT, fd->hints->ranklist[0], fd->comm);
    *error_code = err == 0 ? MPI_SUCCESS
        : ADIOI_CHFS_Error(myname, "resize", ADIOI_CHFS_Path(fd->filename), err);
}

void ADIOI_CHFS_Flush(ADIO_File fd, int *error_code)
{
    static char myname[] = "ADIOI_CHFS_FLUSH";

    /* Deferred open: a rank that never opened the file has nothing to flush. */
    if (fd->fd_sys < 0 || chfs_fsync(fd->fd_sys) == 0)
        *error_code = MPI_SUCCESS;
    else
        *error_code = ADIOI_CHFS_Error(myname, "sync", ADIOI_CHFS_Path(fd->filename), errno);
}

int ADIOI_CHFS_SetLock(ADIO_File fd, int cmd, int type, ADIO_Offset offset, int whence,
                       ADIO_Offset len)
{
    /* Reached only through paths our feature flags and hints switch off (atomic mode, shared
     * file pointers, data-sieving writes): say so instead of pretending to lock. */
    (void) cmd;
    (void) type;
    (void) offset;
    (void) whence;
    (void) len;
    return MPIO_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, "ADIOI_CHFS_SETLOCK",
                                __LINE__, MPI_ERR_UNSUPPORTED_OPERATION, "**io",
                                "CHFS %s: byte-range locks are not supported",
                                ADIOI_CHFS_Path(fd->filename));
}

int ADIOI_CHFS_Feature(ADIO_File fd, int flag)
{
    (void) fd;
    switch (flag) {
        case ADIO_TWO_PHASE:
        case ADIO_DATA_SIEVING_WRITES:
        case ADIO_SCALABLE_RESIZE:
        case ADIO_UNLINK_AFTER_CLOSE:
        case ADIO_IMMEDIATELY_VISIBLE:
            return 1;
        case ADIO_LOCKS:
        case ADIO_SHARED_FP:
        case ADIO_ATOMIC_MODE:
        case ADIO_SCALABLE_OPEN:
        default:
            return 0;
    }
}
