/*
 * The pod sandbox ("pause") process of the node tests: holds the pod's
 * namespaces open, reaps the children that are re-parented to it, and exits
 * 0 on SIGINT or SIGTERM. Built static (`gcc -static`) into a FROM-scratch
 * image by tests/node/build.sh, since the node tests pull no images.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  int saved = errno;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  errno = saved;
}

int main(void) {
  struct sigaction stop = {.sa_handler = on_stop};
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  sigemptyset(&stop.sa_mask);
  sigemptyset(&child.sa_mask);
  if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
      sigaction(SIGCHLD, &child, NULL) < 0) {
    perror("pause: sigaction");
    return 1;
  }
  if (getpid() != 1) {
    fprintf(stderr, "pause: warning: not PID 1, children of other processes are not reaped here\n");
  }
  for (;;) {
    pause();
  }
}
