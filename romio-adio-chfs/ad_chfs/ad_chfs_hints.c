/*
 * ad_chfs_hints.c — MPI_Info hints understood by ad_chfs.
 *
 *   chfs_chunk_size  chunk size in bytes of files this open creates (K/M/G suffix allowed);
 *                    overrides CHFS_CHUNK_SIZE for that file
 *   striping_unit    the standard MPI hint, taken as an alias of chfs_chunk_size
 *
 * Everything else is ROMIO's generic hint handling (cb_*, romio_cb_*, ind_rd_buffer_size, ...),
 * except that data-sieving writes are always disabled: their read-modify-write of a whole
 * window is only safe under a byte-range lock, and CHFS has none. A malformed or non-positive
 * chunk size is an MPI_ERR_INFO_VALUE error naming the hint, not silently ignored; like every
 * ROMIO hint it must be the same on all ranks.
 */
#include "ad_chfs.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#define CHFS_HINT_CHUNK_SIZE "chfs_chunk_size"

/* "65536", "64K", "4M", "1G" -> bytes; -1 if malformed, not positive or above INT_MAX. */
static long long chfs_parse_size(const char *s)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || v <= 0)
        return -1;
    switch (*end) {
        case 'k': case 'K': v <<= 10; end++; break;
        case 'm': case 'M': v <<= 20; end++; break;
        case 'g': case 'G': v <<= 30; end++; break;
        default: break;
    }
    if (*end != '\0' || v > INT_MAX)
        return -1;
    return v;
}

static int chfs_hint_error(const char *myname, const char *value)
{
    return MPIO_Err_create_code(MPI_SUCCESS, MPIR_ERR_RECOVERABLE, (char *) myname, __LINE__,
                                MPI_ERR_INFO_VALUE, "**infoval",
                                "CHFS hint %s=\"%s\": expected a positive size in bytes "
                                "(K/M/G suffix allowed, at most 2G-1)", CHFS_HINT_CHUNK_SIZE,
                                value);
}

void ADIOI_CHFS_SetInfo(ADIO_File fd, MPI_Info users_info, int *error_code)
{
    static char myname[] = "ADIOI_CHFS_SETINFO";
    char value[MPI_MAX_INFO_VAL + 1];
    int flag;

    ADIOI_GEN_SetInfo(fd, users_info, error_code);
    if (*error_code != MPI_SUCCESS)
        return;
    fd->hints->ds_write = ADIOI_HINT_DISABLE;
    ADIOI_Info_set(fd->info, "romio_ds_write", "disable");

    if (users_info == MPI_INFO_NULL)
        return;
    ADIOI_Info_get(users_info, CHFS_HINT_CHUNK_SIZE, MPI_MAX_INFO_VAL, value, &flag);
    if (flag) {
        long long bytes = chfs_parse_size(value);
        if (bytes < 0) {
            /* ADIO_Open ignores SetInfo's error: keep the bad value in fd->info so that
             * ADIOI_CHFS_Check_hints (called by Open) fails the open with this message. */
            ADIOI_Info_set(fd->info, CHFS_HINT_CHUNK_SIZE, value);
            *error_code = chfs_hint_error(myname, value);
            return;
        }
        fd->hints->striping_unit = (int) bytes;
        snprintf(value, sizeof(value), "%lld", bytes);
        ADIOI_Info_set(fd->info, CHFS_HINT_CHUNK_SIZE, value);
    }
}

int ADIOI_CHFS_Check_hints(ADIO_File fd, const char *myname)
{
    char value[MPI_MAX_INFO_VAL + 1];
    int flag;

    ADIOI_Info_get(fd->info, CHFS_HINT_CHUNK_SIZE, MPI_MAX_INFO_VAL, value, &flag);
    if (flag && chfs_parse_size(value) < 0)
        return chfs_hint_error(myname, value);
    return MPI_SUCCESS;
}

int ADIOI_CHFS_Hinted_chunk_size(ADIO_File fd)
{
    return fd->hints->striping_unit > 0 ? fd->hints->striping_unit : 0;
}
