/* util.c — small process helpers shared by the methods: exit statuses as a shell reports them,
 * and passing the launcher's termination signals on to the job (a `timeout` or `kill` aimed at
 * chfs-job must end the job, not leave it running without its supervisor). */
#define _GNU_SOURCE
#include "methods.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

int cj_wait_status(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return 255;
}

static volatile pid_t forward_to;

static void forward(int sig)
{
	if (forward_to > 0)
		kill(forward_to, sig);
}

void cj_forward_signals(pid_t pid)
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward; /* no SA_RESTART: poll/waitpid return EINTR and the loop goes on */
	sigemptyset(&sa.sa_mask);
	forward_to = pid;
	for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}
