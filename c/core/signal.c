/* signal.c -- SIGINT as a flag that lunet.fit polls between steps, so that
 * Ctrl-C ends training at a step boundary with a final checkpoint instead
 * of in the middle of an update. A second SIGINT before the flag is cleared
 * goes to the handler that was there before (luajit's, or the default). */
#include "internal.h"
#include <signal.h>
#include <string.h>

static volatile sig_atomic_t sigint_flag;
static struct sigaction sigint_old;
static int sigint_depth;

static void on_sigint(int sig) {
  if (sigint_flag) {   /* asked twice: let the previous handler act */
    sigaction(SIGINT, &sigint_old, NULL);
    raise(sig);
    return;
  }
  sigint_flag = 1;
}

int ln_sigint_catch(int on) {
  if (on) {
    if (sigint_depth++ == 0) {
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_handler = on_sigint;
      sigemptyset(&sa.sa_mask);
      sa.sa_flags = SA_RESTART;
      if (sigaction(SIGINT, &sa, &sigint_old) != 0) { sigint_depth = 0; return ln_error("sigint: cannot install a handler"); }
      sigint_flag = 0;
    }
    return 0;
  }
  if (sigint_depth == 0) return 0;
  if (--sigint_depth == 0) sigaction(SIGINT, &sigint_old, NULL);
  return 0;
}

int ln_sigint_pending(int clear) {
  int v = sigint_flag != 0;
  if (clear) sigint_flag = 0;
  return v;
}
