/*
 * ad_chfs.c — the ad_chfs function table, joining the CHFS pool, and file-name prefixes.
 *
 * ROMIO selects this table for names prefixed "chfs:" (any case) or "ad_chfs:", and for
 * unprefixed names when ROMIO_FSTYPE_FORCE=chfs: (see romio-ad_chfs.patch). CHFS is a user-space
 * file system with no kernel mount, so detection by statfs magic never applies.
 *
 * Which slots are ours and why: everything that touches the descriptor (contiguous I/O, fcntl,
 * flush, resize, close, locks) is ours, because the descriptor is a libchfs one. Strided and
 * collective I/O use ROMIO's generic algorithms (naive strided writes, data-sieving reads,
 * two-phase aggregation), which reach the file only through our contiguous slots. Non-blocking
 * I/O uses ROMIO's "fake" requests (the blocking call, then a completed request): libchfs has no
 * asynchronous API, and CHFS_ASYNC_ACCESS already overlaps the chunk RPCs of one call.
 *
 * The pool is joined lazily at the first open or delete (chfs_init reads CHFS_SERVER and the
 * other CHFS_* variables, exactly as for a native client) and left at MPI_Finalize through a
 * delete callback on an MPI_COMM_SELF attribute; a pool the application joined itself is left
 * to the application.
 */
#include "ad_chfs.h"

#include <strings.h>

struct ADIOI_Fns_struct ADIO_CHFS_operations = {
    ADIOI_CHFS_Open,            /* Open */
    ADIOI_GEN_OpenColl,         /* OpenColl */
    ADIOI_CHFS_ReadContig,      /* ReadContig */
    ADIOI_CHFS_WriteContig,     /* WriteContig */
    ADIOI_GEN_ReadStridedColl,  /* ReadStridedColl */
    ADIOI_GEN_WriteStridedColl, /* WriteStridedColl */
    ADIOI_GEN_SeekIndividual,   /* SeekIndividual */
    ADIOI_CHFS_Fcntl,           /* Fcntl */
    ADIOI_CHFS_SetInfo,         /* SetInfo */
    ADIOI_GEN_ReadStrided,      /* ReadStrided */
    ADIOI_GEN_WriteStrided,     /* WriteStrided */
    ADIOI_CHFS_Close,           /* Close */
    ADIOI_FAKE_IreadContig,     /* IreadContig */
    ADIOI_FAKE_IwriteContig,    /* IwriteContig */
    ADIOI_FAKE_IODone,          /* ReadDone */
    ADIOI_FAKE_IODone,          /* WriteDone */
    ADIOI_FAKE_IOComplete,      /* ReadComplete */
    ADIOI_FAKE_IOComplete,      /* WriteComplete */
    ADIOI_FAKE_IreadStrided,    /* IreadStrided */
    ADIOI_FAKE_IwriteStrided,   /* IwriteStrided */
    ADIOI_CHFS_Flush,           /* Flush */
    ADIOI_CHFS_Resize,          /* Resize */
    ADIOI_CHFS_Delete,          /* Delete */
    ADIOI_CHFS_Feature,         /* Features */
    "CHFS: ROMIO driver for the CHFS ad-hoc parallel file system (chfs-stack)",
    ADIOI_GEN_IreadStridedColl, /* IreadStridedColl */
    ADIOI_GEN_IwriteStridedColl,        /* IwriteStridedColl */
    ADIOI_CHFS_SetLock          /* SetLock */
};

static int chfs_keyval = MPI_KEYVAL_INVALID;

static int chfs_leave_pool(MPI_Comm comm, int keyval, void *attr, void *extra)
{
    (void) comm;
    (void) attr;
    (void) extra;
    (void) keyval;
    chfs_keyval = MPI_KEYVAL_INVALID;
    chfs_term();
    return MPI_SUCCESS;
}

int ADIOI_CHFS_Init(const char *myname)
{
    if (chfs_keyval != MPI_KEYVAL_INVALID || chfs_initialized())
        return MPI_SUCCESS;
    if (chfs_init(NULL) != 0) {
        int err = errno;
        const char *servers = getenv("CHFS_SERVER");
        char what[256];
        snprintf(what, sizeof(what), "(CHFS_SERVER=%s)", servers ? servers : "<unset>");
        return ADIOI_CHFS_Error(myname, "join pool", what, err);
    }
    /* MPI_Finalize deletes MPI_COMM_SELF's attributes first, while MPI still works. */
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, chfs_leave_pool, &chfs_keyval, NULL);
    MPI_Comm_set_attr(MPI_COMM_SELF, chfs_keyval, NULL);
    return MPI_SUCCESS;
}

const char *ADIOI_CHFS_Path(const char *filename)
{
    static const char *const prefixes[] = { "chfs:", "ad_chfs:" };
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        size_t n = strlen(prefixes[i]);
        if (strncasecmp(filename, prefixes[i], n) == 0)
            return filename + n;
    }
    return filename;
}
