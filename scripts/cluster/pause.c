/*
 * The local cluster's pause image: the process that holds a pod's
 * namespaces. It sleeps, reaps orphaned children, and exits on SIGINT or
 * SIGTERM. Built statically by build.sh (there is no image registry to
 * pull registry.k8s.io/pause from).
 */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) {
	(void)sig;
	_exit(0);
}

static void reap(int sig) {
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int main(void) {
	struct sigaction stop = {.sa_handler = quit};
	struct sigaction child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
	sigaction(SIGINT, &stop, NULL);
	sigaction(SIGTERM, &stop, NULL);
	sigaction(SIGCHLD, &child, NULL);
	for (;;)
		pause();
}
