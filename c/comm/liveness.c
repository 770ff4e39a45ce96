/* liveness.c -- a TCP connection to every peer rank, watched for its end
 * (liveness.h says why). What a rank writes on its connections: 'B' (bye:
 * it ends in order, its end is no loss) and 'G' + a 4-byte rank (a notice:
 * that rank is gone; the writer will end soon after, failing for it, and
 * its peers must name the first rank lost, not the writer). */
#define _GNU_SOURCE   /* accept4, getifaddrs */
#include "liveness.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  uint64_t token;   /* the job's (rank 0's): a stranger's listener on a reused address refuses it */
  int32_t from, to;
} hello;

typedef struct {
  int fd;               /* the connection, or -1 */
  bool bye;             /* it said bye */
  unsigned char buf[8]; /* a notice read in part */
  int have;
} conn;

static int listen_fd = -1;
static conn *conns;      /* per world rank */
static int nranks;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int ms_until(double t) {
  double d = t - now_s();
  return d <= 0 ? 0 : d > 1e6 ? 1000000000 : (int)(d * 1e3) + 1;
}

/* waits for fd to be readable (POLLIN) or writable (POLLOUT) until deadline: 1 ready, 0 not */
static int wait_fd(int fd, short events, double deadline) {
  for (;;) {
    struct pollfd p = {fd, events, 0};
    int n = poll(&p, 1, ms_until(deadline));
    if (n > 0) return 1;
    if (n == 0 || errno != EINTR) return 0;
  }
}

static int io_all(int fd, void *buf, size_t n, bool out, double deadline) {
  char *p = buf;
  while (n > 0) {
    if (!wait_fd(fd, out ? POLLOUT : POLLIN, deadline)) return -1;
    ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

int live_listen(live_addr *me) {
  memset(me, 0, sizeof *me);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof sa;
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, SOMAXCONN) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
    close(fd);
    return -1;
  }
  /* the host's IPv4 addresses, loopback only where it has no other */
  struct ifaddrs *ifs = NULL;
  int n = 0;
  if (getifaddrs(&ifs) == 0) {
    for (struct ifaddrs *i = ifs; i && n < LIVE_ADDRS; i = i->ifa_next)
      if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) && !(i->ifa_flags & IFF_LOOPBACK))
        me->addr[n++] = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
    freeifaddrs(ifs);
  }
  if (n == 0) me->addr[0] = htonl(INADDR_LOOPBACK);
  me->port = sa.sin_port;
  listen_fd = fd;
  return 0;
}

/* a connection to addr:port within deadline, or -1 */
static int dial(uint32_t addr, uint16_t port, double deadline) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = addr;
  sa.sin_port = port;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int err = 0;
    socklen_t len = sizeof err;
    if (errno != EINPROGRESS || !wait_fd(fd, POLLOUT, deadline) ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      close(fd);
      return -1;
    }
  }
  return fd;
}

int live_connect(int rank, int size, const live_addr *all, uint64_t token, double timeout_s) {
  if (listen_fd < 0 || size < 2 || rank < 0 || rank >= size) return 0;
  pthread_mutex_lock(&mu);
  conns = calloc((size_t)size, sizeof *conns);
  if (!conns) { pthread_mutex_unlock(&mu); return 0; }
  nranks = size;
  for (int r = 0; r < size; r++) conns[r].fd = -1;
  double deadline = now_s() + timeout_s;
  int watched = 0;
  /* the lower ranks: each address in turn; the hello answered with 'K' once
   * that rank accepts (it has connected to its own lower ranks by then) */
  for (int r = 0; r < rank; r++) {
    for (int a = 0; a < LIVE_ADDRS && all[r].port && all[r].addr[a] && conns[r].fd < 0; a++) {
      double t = now_s() + 1.0;
      int fd = dial(all[r].addr[a], all[r].port, t < deadline ? t : deadline);
      if (fd < 0) continue;
      hello h = {token, rank, r};
      char k = 0;
      if (io_all(fd, &h, sizeof h, true, deadline) != 0 || io_all(fd, &k, 1, false, deadline) != 0 || k != 'K') {
        close(fd);
        continue;
      }
      conns[r].fd = fd;
      watched++;
    }
  }
  /* the higher ranks connect here */
  int want = 0;
  for (int r = rank + 1; r < size; r++) want += all[r].port != 0;
  for (int got = 0; got < want && wait_fd(listen_fd, POLLIN, deadline);) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    hello h;
    double t = now_s() + 1.0;
    if (io_all(fd, &h, sizeof h, false, t < deadline ? t : deadline) != 0 || h.token != token || h.to != rank ||
        h.from <= rank || h.from >= size || conns[h.from].fd >= 0 || io_all(fd, "K", 1, true, deadline) != 0) {
      close(fd);
      continue;
    }
    conns[h.from].fd = fd;
    got++;
    watched++;
  }
  close(listen_fd);
  listen_fd = -1;
  pthread_mutex_unlock(&mu);
  return watched;
}

/* with mu held: what rank r's connection holds now. 1: it ended without a
 * bye; *notice set (>= 0) when it told of another rank gone */
static int drain(int r, int *notice) {
  conn *c = &conns[r];
  for (;;) {
    unsigned char buf[64];
    ssize_t n = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n <= 0) {   /* the end (0), or a reset: the process is gone, or ended in order */
      close(c->fd);
      c->fd = -1;
      return !c->bye;
    }
    for (ssize_t i = 0; i < n; i++) {
      if (c->have > 0) {   /* a notice's rank, byte by byte */
        c->buf[c->have++] = buf[i];
        if (c->have == 5) {
          int32_t v;
          memcpy(&v, c->buf + 1, 4);
          if (v >= 0 && v < nranks && *notice < 0) *notice = v;
          c->have = 0;
        }
      } else if (buf[i] == 'B') c->bye = true;
      else if (buf[i] == 'G') c->buf[c->have++] = 'G';
    }
  }
}

int live_poll(void) {
  pthread_mutex_lock(&mu);
  int notice = -1, ended = -1;
  for (int r = 0; conns && r < nranks; r++)
    if (conns[r].fd >= 0 && drain(r, &notice) && ended < 0) ended = r;
  pthread_mutex_unlock(&mu);
  /* a rank that told of another lost ends soon after, failing for it: the
   * one it named is the one lost */
  return notice >= 0 ? notice : ended;
}

static void tell_all(const void *msg, size_t n) {
  for (int r = 0; conns && r < nranks; r++)
    if (conns[r].fd >= 0) (void)send(conns[r].fd, msg, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void live_tell(int gone) {
  unsigned char msg[5] = {'G'};
  int32_t v = gone;
  memcpy(msg + 1, &v, 4);
  pthread_mutex_lock(&mu);
  tell_all(msg, sizeof msg);
  pthread_mutex_unlock(&mu);
}

void live_bye(void) {
  pthread_mutex_lock(&mu);
  tell_all("B", 1);
  for (int r = 0; conns && r < nranks; r++)
    if (conns[r].fd >= 0) { close(conns[r].fd); conns[r].fd = -1; }
  if (listen_fd >= 0) { close(listen_fd); listen_fd = -1; }
  pthread_mutex_unlock(&mu);
}
