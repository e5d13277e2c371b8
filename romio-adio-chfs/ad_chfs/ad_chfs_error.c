/*
 * ad_chfs_error.c — the one place where a CHFS errno becomes an MPI error code.
 *
 * libchfs reports failures as -1 + errno (like POSIX). MPI programs test error *classes*
 * (MPI_Error_class), so each errno maps to the class the MPI standard names for that cause;
 * the message (MPI_Error_string) names the operation, the CHFS path and the cause in one line,
 * e.g. "CHFS open /out/x: No such file or directory". The generic "**" keys keep MPICH's
 * short message for error-detail level "generic"; the specific text is our own format.
 */
#include "ad_chfs.h"

#include <errno.h>
#include <string.h>

static int chfs_error_class(int err, const char **generic)
{
    switch (err) {
        case ENOENT:
            *generic = "**filenoexist";
            return MPI_ERR_NO_SUCH_FILE;
        case EEXIST:
            *generic = "**fileexist";
            return MPI_ERR_FILE_EXISTS;
        case EACCES:
        case EPERM:
            *generic = "**fileaccess";
            return MPI_ERR_ACCESS;
        case EROFS:
            *generic = "**io";
            return MPI_ERR_READ_ONLY;
        case ENOSPC:
            *generic = "**filenospace";
            return MPI_ERR_NO_SPACE;
        case EDQUOT:
            *generic = "**filequota";
            return MPI_ERR_QUOTA;
        case ENAMETOOLONG:
        case ENOTDIR:
        case EISDIR:
        case ELOOP:
        case EINVAL:
            *generic = "**filename";
            return MPI_ERR_BAD_FILE;
        case ENOTSUP:
            *generic = "**io";
            return MPI_ERR_UNSUPPORTED_OPERATION;
        default:       /* EIO, ENOTCONN, ETIMEDOUT (dead server), EBADF, ... */
            *generic = "**io";
            return MPI_ERR_IO;
    }
}

int ADIOI_CHFS_Error(const char *myname, const char *op, const char *path, int err)
{
    const char *generic;
    int errclass;

    if (err == 0)
        err = EIO;      /* a failure without errno is still a failure */
    errclass = chfs_error_class(err, &generic);
    return MPIO_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, (char *) myname, __LINE__,
                                errclass, generic, "CHFS %s %s: %s", op, path, strerror(err));
}
