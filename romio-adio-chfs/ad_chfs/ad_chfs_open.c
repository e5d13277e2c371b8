/*
 * ad_chfs_open.c — open, close and delete of CHFS files.
 *
 * MPI access modes map onto chfs_open_posix's open(2) flags: RDONLY/WRONLY/RDWR pass through
 * (ROMIO checks them before calling us), CREATE is O_CREAT — libchfs opens an existing file or
 * creates it exclusively in one call, so a concurrently created file is never truncated — and
 * CREATE|EXCL adds O_EXCL, so the loser gets MPI_ERR_FILE_EXISTS. A missing directory is
 * ENOENT (MPI_ERR_NO_SUCH_FILE), as on a local file system. ROMIO's collective open already
 * creates the file on one rank before the others open it.
 * APPEND sets the individual file pointer to the end of file (ROMIO writes at explicit
 * offsets, so O_APPEND is not passed down: it would make every pwrite append). DELETE_ON_CLOSE
 * is carried out by ROMIO's close through our Delete slot. New files get the chunk size from
 * the hints (chfs_chunk_size / striping_unit), else CHFS_CHUNK_SIZE or the pool default.
 */
#include "ad_chfs.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

static mode_t chfs_create_mode(ADIO_File fd)
{
    mode_t mask;

    if (fd->perm != ADIO_PERM_NULL)
        return (mode_t) fd->perm;
    mask = umask(022);
    umask(mask);
    return 0666 & ~mask;
}

void ADIOI_CHFS_Open(ADIO_File fd, int *error_code)
{
    static char myname[] = "ADIOI_CHFS_OPEN";
    const char *path = ADIOI_CHFS_Path(fd->filename);
    int amode = fd->access_mode, flags, cfd;

    fd->fd_sys = -1;
    *error_code = ADIOI_CHFS_Check_hints(fd, myname);
    if (*error_code != MPI_SUCCESS)
        return;
    *error_code = ADIOI_CHFS_Init(myname);
    if (*error_code != MPI_SUCCESS)
        return;

    flags = (amode & ADIO_RDONLY) ? O_RDONLY : (amode & ADIO_WRONLY) ? O_WRONLY : O_RDWR;
    if (amode & ADIO_CREATE)
        flags |= O_CREAT | ((amode & ADIO_EXCL) ? O_EXCL : 0);
    cfd = chfs_open_posix(path, flags, (amode & ADIO_CREATE) ? chfs_create_mode(fd) : 0,
                          (amode & ADIO_CREATE) ? ADIOI_CHFS_Hinted_chunk_size(fd) : 0);
    if (cfd < 0) {
        *error_code = ADIOI_CHFS_Error(myname, "open", path, errno);
        fd->fd_sys = -1;
        return;
    }
    fd->fd_sys = cfd;
    fd->fd_direct = -1;

    if (amode & ADIO_APPEND) {
        off_t end = chfs_seek(cfd, 0, SEEK_END);
        if (end < 0) {
            *error_code = ADIOI_CHFS_Error(myname, "seek to end of", path, errno);
            chfs_close(cfd);
            fd->fd_sys = -1;
            return;
        }
        fd->fp_ind = fd->fp_sys_posn = end;
    }
    *error_code = MPI_SUCCESS;
}

void ADIOI_CHFS_Close(ADIO_File fd, int *error_code)
{
    static char myname[] = "ADIOI_CHFS_CLOSE";
    int rc = chfs_close(fd->fd_sys);

    fd->fd_sys = -1;
    *error_code = rc == 0 ? MPI_SUCCESS
        : ADIOI_CHFS_Error(myname, "close", ADIOI_CHFS_Path(fd->filename), errno);
}

void ADIOI_CHFS_Delete(const char *filename, int *error_code)
{
    static char myname[] = "ADIOI_CHFS_DELETE";
    const char *path = ADIOI_CHFS_Path(filename);

    *error_code = ADIOI_CHFS_Init(myname);
    if (*error_code != MPI_SUCCESS)
        return;
    *error_code = chfs_unlink(path) == 0 ? MPI_SUCCESS
        : ADIOI_CHFS_Error(myname, "delete", path, errno);
}
