/*
 * gfs_pio_coop.h - the cooperative cache in libgfarm's read/write path
 * (chfs-stack patch).  gfs_pio_section.c calls these around the storage
 * operations; each is a no-op when GFARM_COOP_CACHE_SOCKET is unset.
 */
typedef gfarm_error_t (*gfs_pio_coop_pread_fn)(GFS_File,
	char *, size_t, gfarm_off_t, size_t *);

/* read: local cache -> best peer per gfmd -> gfsd (storage_pread) */
gfarm_error_t gfs_pio_coop_pread(GFS_File, gfs_pio_coop_pread_fn,
	char *, size_t, gfarm_off_t, size_t *);
/* is the cache on (writes are staged)? */
int gfs_pio_coop_caches_writes(void);
/* is the cache in use for reads through this descriptor? */
int gfs_pio_coop_active(GFS_File);
/* gfs_pio_recvfile through the cache: read, then write to w_fd */
gfarm_error_t gfs_pio_coop_recvfile(GFS_File, gfs_pio_coop_pread_fn,
	gfarm_off_t, int, gfarm_off_t, gfarm_off_t, EVP_MD_CTX *,
	gfarm_off_t *);
typedef gfarm_error_t (*gfs_pio_coop_pwrite_fn)(GFS_File,
	const char *, size_t, gfarm_off_t, size_t *);
/* gfs_pio_sendfile through pwrite, so written data pass the cache */
gfarm_error_t gfs_pio_coop_sendfile(GFS_File, gfs_pio_coop_pwrite_fn,
	gfarm_off_t, int, gfarm_off_t, gfarm_off_t, gfarm_off_t *);
typedef gfarm_error_t (*gfs_pio_coop_sendfile_fn)(GFS_File, gfarm_off_t,
	int, gfarm_off_t, gfarm_off_t, EVP_MD_CTX *, gfarm_off_t *);
/* can gfs_pio_sendfile from r_fd stage by reference (a regular file)? */
int gfs_pio_coop_stages_by_reference(GFS_File, int, gfarm_off_t);
/* the storage's sendfile, then the sent range staged by reference */
gfarm_error_t gfs_pio_coop_storage_sendfile(GFS_File, gfs_pio_coop_sendfile_fn,
	gfarm_off_t, int, gfarm_off_t, gfarm_off_t, EVP_MD_CTX *, gfarm_off_t *);
/* write: invalidate this node's copy, stage the data for close (an
 * offset < 0: gfsd's offset is not known, nothing staged is published) */
void gfs_pio_coop_written(GFS_File, const char *, gfarm_off_t, size_t);
/* a write failed: gfsd may hold bytes that were not staged */
void gfs_pio_coop_write_failed(GFS_File);
void gfs_pio_coop_truncated(GFS_File);
/* does close need to learn the file's new generation? */
int gfs_pio_coop_needs_gen(GFS_File);
/* after gfmd close: the new generation, or NULL if close failed */
void gfs_pio_coop_closed(GFS_File, const gfarm_uint64_t *);
