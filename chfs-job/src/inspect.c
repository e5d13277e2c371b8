/* inspect.c — reading a program's ELF headers for `auto` (see inspect.h). Only the headers are
 * read: the program headers for PT_INTERP and PT_DYNAMIC, the dynamic section for DT_NEEDED
 * names (through DT_STRTAB, mapped back to a file offset by the PT_LOAD segments). */
#define _GNU_SOURCE
#include "inspect.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int find_in_path(const char *argv0, char *out, size_t len)
{
	if (strchr(argv0, '/')) {
		snprintf(out, len, "%s", argv0);
		return access(out, X_OK) == 0 ? 0 : -errno;
	}
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path; *p;) {
		const char *e = strchr(p, ':');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		snprintf(out, len, "%.*s/%s", (int)n, n ? p : ".", argv0);
		struct stat st;
		if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
			return 0;
		p += n + (e ? 1 : 0);
	}
	return -ENOENT;
}

static uint64_t vaddr_to_off(const Elf64_Phdr *ph, int n, uint64_t va)
{
	for (int i = 0; i < n; i++)
		if (ph[i].p_type == PT_LOAD && va >= ph[i].p_vaddr && va < ph[i].p_vaddr + ph[i].p_filesz)
			return va - ph[i].p_vaddr + ph[i].p_offset;
	return 0;
}

static void scan_needed(int fd, const Elf64_Phdr *ph, int n, const Elf64_Phdr *dyn, struct cj_prog *o)
{
	size_t cnt = dyn->p_filesz / sizeof(Elf64_Dyn);
	if (cnt > 4096)
		return;
	Elf64_Dyn *d = calloc(cnt, sizeof(*d));
	if (!d || pread(fd, d, cnt * sizeof(*d), (off_t)dyn->p_offset) != (ssize_t)(cnt * sizeof(*d))) {
		free(d);
		return;
	}
	uint64_t strtab = 0;
	for (size_t i = 0; i < cnt && d[i].d_tag != DT_NULL; i++)
		if (d[i].d_tag == DT_STRTAB)
			strtab = vaddr_to_off(ph, n, d[i].d_un.d_ptr);
	for (size_t i = 0; strtab && i < cnt && d[i].d_tag != DT_NULL; i++) {
		if (d[i].d_tag != DT_NEEDED)
			continue;
		char name[128] = "";
		if (pread(fd, name, sizeof(name) - 1, (off_t)(strtab + d[i].d_un.d_val)) <= 0)
			continue;
		if (strncmp(name, "libmpi", 6) == 0 || strncmp(name, "libmpich", 8) == 0)
			o->mpi = true;
	}
	free(d);
}

int cj_inspect(const char *argv0, struct cj_prog *o)
{
	memset(o, 0, sizeof(*o));
	int rc = find_in_path(argv0, o->path, sizeof(o->path));
	if (rc < 0)
		return rc;
	o->found = true;
	int fd = open(o->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) == 0)
		o->setuid = st.st_mode & (S_ISUID | S_ISGID);
	unsigned char hdr[256];
	ssize_t n = pread(fd, hdr, sizeof(hdr), 0);
	if (n >= 2 && hdr[0] == '#' && hdr[1] == '!') {
		o->script = true;
		hdr[n < 255 ? n : 255] = '\0';
		char *s = (char *)hdr + 2;
		while (*s == ' ')
			s++;
		s[strcspn(s, " \n")] = '\0';
		snprintf(o->interp, sizeof(o->interp), "%s", s);
		close(fd);
		char keep[sizeof(o->interp)];
		memcpy(keep, o->interp, sizeof(keep));
		/* the script runs as its interpreter: inspect that, remember it was a script */
		if (cj_inspect(keep, o) < 0)
			return -ENOEXEC;
		o->script = true;
		memcpy(o->interp, keep, sizeof(keep));
		return 0;
	}
	if (n < (ssize_t)sizeof(Elf64_Ehdr) || memcmp(hdr, ELFMAG, SELFMAG) != 0) {
		close(fd);
		return 0;
	}
	o->elf = true;
	Elf64_Ehdr eh;
	memcpy(&eh, hdr, sizeof(eh));
	o->x86_64 = hdr[EI_CLASS] == ELFCLASS64 && eh.e_machine == EM_X86_64;
	if (hdr[EI_CLASS] != ELFCLASS64 || eh.e_phnum == 0 || eh.e_phnum > 256) {
		close(fd);
		return 0;
	}
	Elf64_Phdr *ph = calloc(eh.e_phnum, sizeof(*ph));
	if (ph && pread(fd, ph, eh.e_phnum * sizeof(*ph), (off_t)eh.e_phoff) ==
	                  (ssize_t)(eh.e_phnum * sizeof(*ph))) {
		for (int i = 0; i < eh.e_phnum; i++)
			if (ph[i].p_type == PT_INTERP)
				o->dynamic = true;
		for (int i = 0; i < eh.e_phnum; i++)
			if (ph[i].p_type == PT_DYNAMIC)
				scan_needed(fd, ph, eh.e_phnum, &ph[i], o);
	}
	free(ph);
	close(fd);
	return 0;
}
