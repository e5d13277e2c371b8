/*
 * ad_chfs_io.c — contiguous reads and writes: the only slots through which data moves.
 *
 * Every other data path of ROMIO (strided, collective two-phase, non-blocking) ends here, so
 * these two functions carry the whole bandwidth: one chfs_pread/chfs_pwrite per call, looping
 * only on short transfers (libchfs already splits a call into chunk RPCs and, with
 * CHFS_ASYNC_ACCESS=1, issues them concurrently). Reads stop at end of file and report the
 * bytes actually read in the status, as MPI requires. File-pointer bookkeeping follows ROMIO's
 * generic driver: ADIO_INDIVIDUAL uses and advances fd->fp_ind; fp_sys_posn records where the
 * last transfer ended.
 */
#include "ad_chfs.h"

#include <errno.h>
#include <limits.h>

/* One transfer of at most SSIZE_MAX bytes per libchfs call (sizes above that are split). */
#define CHFS_MAX_XFER ((ADIO_Offset) 1 << 30)

void ADIOI_CHFS_ReadContig(ADIO_File fd, void *buf, int count, MPI_Datatype datatype,
                           int file_ptr_type, ADIO_Offset offset, ADIO_Status *status,
                           int *error_code)
{
    static char myname[] = "ADIOI_CHFS_READCONTIG";
    MPI_Count type_size;
    ADIO_Offset len, done = 0;

    MPI_Type_size_x(datatype, &type_size);
    len = (ADIO_Offset) type_size * count;
    if (file_ptr_type == ADIO_INDIVIDUAL)
        offset = fd->fp_ind;

    while (done < len) {
        ADIO_Offset want = len - done < CHFS_MAX_XFER ? len - done : CHFS_MAX_XFER;
        ssize_t n = chfs_pread(fd->fd_sys, (char *) buf + done, (size_t) want,
                               (off_t) (offset + done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fd->fp_sys_posn = -1;
            *error_code = ADIOI_CHFS_Error(myname, "read", ADIOI_CHFS_Path(fd->filename),
                                           errno);
            return;
        }
        if (n == 0)
            break;      /* end of file */
        done += n;
    }
    fd->fp_sys_posn = offset + done;
    if (file_ptr_type == ADIO_INDIVIDUAL)
        fd->fp_ind += done;
#ifdef HAVE_STATUS_SET_BYTES
    MPIR_Status_set_bytes(status, datatype, done);
#endif
    *error_code = MPI_SUCCESS;
}

void ADIOI_CHFS_WriteContig(ADIO_File fd, const void *buf, int count, MPI_Datatype datatype,
                            int file_ptr_type, ADIO_Offset offset, ADIO_Status *status,
                            int *error_code)
{
    static char myname[] = "ADIOI_CHFS_WRITECONTIG";
    MPI_Count type_size;
    ADIO_Offset len, done = 0;

    MPI_Type_size_x(datatype, &type_size);
    len = (ADIO_Offset) type_size * count;
    if (file_ptr_type == ADIO_INDIVIDUAL)
        offset = fd->fp_ind;

    while (done < len) {
        ADIO_Offset want = len - done < CHFS_MAX_XFER ? len - done : CHFS_MAX_XFER;
        ssize_t n = chfs_pwrite(fd->fd_sys, (const char *) buf + done, (size_t) want,
                                (off_t) (offset + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fd->fp_sys_posn = -1;
            *error_code = ADIOI_CHFS_Error(myname, "write", ADIOI_CHFS_Path(fd->filename),
                                           n < 0 ? errno : EIO);
            return;
        }
        done += n;
    }
    fd->fp_sys_posn = offset + done;
    if (file_ptr_type == ADIO_INDIVIDUAL)
        fd->fp_ind += done;
#ifdef HAVE_STATUS_SET_BYTES
    MPIR_Status_set_bytes(status, datatype, done);
#endif
    *error_code = MPI_SUCCESS;
}
