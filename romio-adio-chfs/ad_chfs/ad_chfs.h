/*
 * ad_chfs.h — ROMIO ADIO driver for CHFS (chfs-stack): declarations shared by the driver's
 * modules.
 *
 * The driver maps ADIO calls onto the public CHFS client API (chfs.h) and nothing else: the
 * CHFS descriptor of an open file lives in fd->fd_sys (a libchfs descriptor, NOT a kernel one),
 * so every ADIO slot that would hand fd_sys to a POSIX call (read/write, fcntl size query,
 * fsync, ftruncate, close, byte-range locks, POSIX aio) is implemented here; the generic ROMIO
 * code we keep (strided and collective I/O, two-phase aggregation, non-blocking wrappers,
 * seek) only calls back into our slots through fd->fns.
 *
 * Module map: ad_chfs.c (function table, pool join/leave, path prefix), ad_chfs_open.c (open,
 * close, delete), ad_chfs_io.c (contiguous read/write), ad_chfs_fcntl.c (size, resize,
 * preallocate, sync, atomicity, locks, features), ad_chfs_hints.c (MPI_Info hints),
 * ad_chfs_error.c (errno -> MPI error class with a readable message).
 */
#ifndef AD_CHFS_H_INCLUDED
#define AD_CHFS_H_INCLUDED

#include "adio.h"
#include <chfs.h>

/* Join the CHFS pool once per process (chfs_init with CHFS_* from the environment) and arrange
 * chfs_term at MPI_Finalize. Returns MPI_SUCCESS or an MPI error code. */
int ADIOI_CHFS_Init(const char *myname);

/* The CHFS path of a ROMIO file name: strips a "chfs:" / "CHFS:" / "ad_chfs:" prefix. */
const char *ADIOI_CHFS_Path(const char *filename);

/* errno of a failed CHFS call -> MPI error code whose class matches (ENOENT -> NO_SUCH_FILE,
 * EEXIST -> FILE_EXISTS, EACCES/EPERM -> ACCESS, ...) and whose message reads
 * "CHFS <op> <path>: <strerror>". */
int ADIOI_CHFS_Error(const char *myname, const char *op, const char *path, int err);

/* MPI_SUCCESS, or an MPI_ERR_INFO_VALUE code if fd->info holds a malformed CHFS hint. */
int ADIOI_CHFS_Check_hints(ADIO_File fd, const char *myname);

/* Chunk size requested through hints for files this open creates (0 = CHFS default). */
int ADIOI_CHFS_Hinted_chunk_size(ADIO_File fd);

void ADIOI_CHFS_Open(ADIO_File fd, int *error_code);
void ADIOI_CHFS_Close(ADIO_File fd, int *error_code);
void ADIOI_CHFS_Delete(const char *filename, int *error_code);
void ADIOI_CHFS_ReadContig(ADIO_File fd, void *buf, int count, MPI_Datatype datatype,
                           int file_ptr_type, ADIO_Offset offset, ADIO_Status *status,
                           int *error_code);
void ADIOI_CHFS_WriteContig(ADIO_File fd, const void *buf, int count, MPI_Datatype datatype,
                            int file_ptr_type, ADIO_Offset offset, ADIO_Status *status,
                            int *error_code);
void ADIOI_CHFS_Fcntl(ADIO_File fd, int flag, ADIO_Fcntl_t *fcntl_struct, int *error_code);
void ADIOI_CHFS_SetInfo(ADIO_File fd, MPI_Info users_info, int *error_code);
void ADIOI_CHFS_Flush(ADIO_File fd, int *error_code);
void ADIOI_CHFS_Resize(ADIO_File fd, ADIO_Offset size, int *error_code);
int ADIOI_CHFS_Feature(ADIO_File fd, int flag);
int ADIOI_CHFS_SetLock(ADIO_File fd, int cmd, int type, ADIO_Offset offset, int whence,
                       ADIO_Offset len);

#endif /* AD_CHFS_H_INCLUDED */
