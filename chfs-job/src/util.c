/* util.c — small process helpers shared by the methods: exit statuses as a shell reports them. */
#define _GNU_SOURCE
#include "methods.h"

#include <sys/wait.h>

int cj_wait_status(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 255;
}
