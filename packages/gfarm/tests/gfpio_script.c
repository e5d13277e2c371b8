/*
 * gfpio_script.c - drive libgfarm's gfs_pio API from a test, one command per
 * line on stdin, so a test can interleave writes through several open
 * descriptors with reads by other processes and nodes (test_coop_stale.py).
 *
 *   open SLOT PATH MODE           write-only: gfs_pio_create (trunc),
 *                                 gfs_pio_open (keep), either with
 *                                 GFARM_FILE_APPEND (truncappend, append)
 *   write SLOT OFF CHAR LEN       LEN bytes of CHAR at OFF (seek + write;
 *                                 with GFARM_FILE_APPEND gfsd appends)
 *   close SLOT                    gfs_pio_close
 *
 * Each command answers one line, "ok" or "err <message>", flushed, so the
 * test knows the step is done (the data reached gfsd only when the gfs_pio
 * buffer is flushed: a write is followed by gfs_pio_flush).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gfarm/gfarm.h>

#define NSLOT 4

static GFS_File slot[NSLOT];

static const char *
do_open(int s, const char *path, const char *mode)
{
	int append = strstr(mode, "append") != NULL ? GFARM_FILE_APPEND : 0;
	gfarm_error_t e;

	if (strncmp(mode, "trunc", 5) == 0)
		e = gfs_pio_create(path,
		    GFARM_FILE_WRONLY | GFARM_FILE_TRUNC | append, 0644,
		    &slot[s]);
	else if (strcmp(mode, "keep") == 0 || strcmp(mode, "append") == 0)
		e = gfs_pio_open(path, GFARM_FILE_WRONLY | append, &slot[s]);
	else
		return ("bad open mode");
	return (e == GFARM_ERR_NO_ERROR ? NULL : gfarm_error_string(e));
}

static const char *
do_write(int s, long long off, int c, size_t len)
{
	char *buf = malloc(len);
	gfarm_off_t pos;
	gfarm_error_t e;
	size_t done = 0;
	int n;

	if (buf == NULL)
		return ("out of memory");
	memset(buf, c, len);
	e = gfs_pio_seek(slot[s], off, GFARM_SEEK_SET, &pos);
	while (e == GFARM_ERR_NO_ERROR && done < len) {
		e = gfs_pio_write(slot[s], buf + done, (int)(len - done), &n);
		done += n;
	}
	if (e == GFARM_ERR_NO_ERROR)
		e = gfs_pio_flush(slot[s]);
	free(buf);
	return (e == GFARM_ERR_NO_ERROR ? NULL : gfarm_error_string(e));
}

int
main(int argc, char **argv)
{
	char line[4096], path[4000], mode[16], c;
	long long off;
	size_t len;
	const char *err;
	gfarm_error_t e;
	int s;

	if ((e = gfarm_initialize(&argc, &argv)) != GFARM_ERR_NO_ERROR) {
		fprintf(stderr, "gfpio_script: %s\n", gfarm_error_string(e));
		return (1);
	}
	while (fgets(line, sizeof(line), stdin) != NULL) {
		if (sscanf(line, "open %d %3999s %15s", &s, path, mode) == 3 &&
		    s >= 0 && s < NSLOT)
			err = do_open(s, path, mode);
		else if (sscanf(line, "write %d %lld %c %zu", &s, &off, &c,
		    &len) == 4 && s >= 0 && s < NSLOT && slot[s] != NULL)
			err = do_write(s, off, c, len);
		else if (sscanf(line, "close %d", &s) == 1 && s >= 0 &&
		    s < NSLOT && slot[s] != NULL) {
			e = gfs_pio_close(slot[s]);
			slot[s] = NULL;
			err = e == GFARM_ERR_NO_ERROR ? NULL :
			    gfarm_error_string(e);
		} else
			err = "bad command";
		if (err != NULL)
			printf("err %s\n", err);
		else
			printf("ok\n");
		fflush(stdout);
	}
	gfarm_terminate();
	return (0);
}
