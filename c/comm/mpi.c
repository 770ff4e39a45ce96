/* mpi.c -- the "mpi" collective backend: ranks in other processes (and
 * hosts), reached through Open MPI's non-blocking collectives.
 *
 * MPI itself is in build/liblunet_mpi.so (c/mpi/shim.c, built with mpicc),
 * loaded with dlopen on first use: liblunet.so builds, loads and works
 * without Open MPI, and a world of one never loads it.
 *
 * One rank per process (nlocal 1): the group's ranks are the members' order
 * in the list of world (process) ranks that made it. Each collective is a
 * task on this rank's device stream (the comm stream for allreduce_async)
 * that starts the MPI operation and polls MPI_Test until it completes, so
 * the compute stream (or, async, the compute work queued after it) goes on
 * meanwhile. The two streams use separate MPI communicators: each issues its
 * collectives in call order, so every rank issues them in the same order on
 * each communicator whatever the interleaving of the two streams.
 *
 * No hangs: before its data moves, every collective exchanges a signature
 * (sequence number, op, dtype, numel, root, wire, the Lua call site, and
 * whether this rank's stream failed earlier) with an allgather; ranks that
 * disagree all fail naming both call sites, and a rank whose stream failed
 * aborts the collective on every rank. While it waits, a rank checks that
 * its peers live (a TCP connection to every peer, which ends when the peer
 * does, on any host: liveness.c; the pids of the peers on its host; notices
 * from other ranks) and gives up after the timeout (dist.init{timeout}) naming the
 * missing rank, host and pid. Open MPI's launcher ends the job about a
 * second after one rank dies (SIGTERM, then SIGKILL): the SIGTERM makes the
 * waiting ranks look for the lost rank at once, so they fail with its name
 * before the launcher kills them.
 *
 * send/recv: a header (numel, dtype) then the data, MPI_Isend from a staging
 * copy that stays until MPI is done with it (a send never waits for its
 * receiver); the receiver checks the header against its tensor. */
#define _GNU_SOURCE   /* dladdr */
#include "comm.h"
#include "liveness.h"
#include "../core/simd.h"   /* LN_SIMD */
#include "../mpi/shim.h"
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { K_ALLREDUCE, K_BROADCAST, K_REDUCE_SCATTER, K_ALLGATHER, K_BARRIER, K_SEND, K_RECV };
static const char *kind_names[] = {"allreduce", "broadcast", "reduce_scatter", "allgather", "barrier", "send", "recv"};
static const char *op_names[] = {"sum", "avg", "max", "min"};
enum { HOSTLEN = 64, SITELEN = 200, TAG_HDR = 1, TAG_DATA = 2, TAG_GONE = 3 };
/* how long init waits for the liveness connections (a peer it cannot reach is left unwatched) */
static const double LIVE_CONNECT_S = 5.0;
/* how often a wait looks for lost peers: when one rank fails for a lost
 * peer and exits, mpirun ends the others soon after, and each should have
 * named the lost rank by then */
static const double CHECK_S = 0.01;

typedef struct {
  char host[HOSTLEN];
  int32_t pid;
  live_addr live;    /* where its liveness connections are accepted (liveness.h) */
  uint64_t token;    /* rank 0's is the job's: a hello from another job is refused */
} peer;

/* the process's MPI state: set up once by ln_dist_init */
static struct {
  pthread_mutex_t mu;
  void *dl;
  const ln_mpi_shim *shim;
  bool up, down;
  int rank, size, level;
  double timeout;
  peer *peers;                    /* per world rank */
  void *world;                    /* the exchange at init; notices of lost ranks */
  atomic_int lost;                /* a world rank known gone, or -1 */
  void *notice_req;               /* the posted receive of a notice */
  int32_t notice;                 /* its buffer: the lost rank another rank saw */
} G = {PTHREAD_MUTEX_INITIALIZER, .lost = -1, .timeout = 300};
static pthread_mutex_t lost_mu = PTHREAD_MUTEX_INITIALIZER;

/* the mpi backend's own thread: async collectives of an inline device (below) */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv, done_cv;
  struct job *head, *tail;
  bool started, busy;
  pthread_t th;
} Q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};

static volatile sig_atomic_t got_sigterm;
static struct sigaction sigterm_old;

/* MPI calls from several threads: Open MPI gives MPI_THREAD_MULTIPLE, but a
 * build that does not still works, one call at a time */
static pthread_mutex_t call_mu = PTHREAD_MUTEX_INITIALIZER;
#define SHIM(CALL) (pthread_mutex_lock(&call_mu), G.shim->CALL, pthread_mutex_unlock(&call_mu))
static int shim_rc(int rc) { pthread_mutex_unlock(&call_mu); return rc; }
#define SHIM_RC(CALL) (pthread_mutex_lock(&call_mu), shim_rc(G.shim->CALL))

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 1 when process pid on this host has ended (gone or a zombie) */
static int pid_gone(int pid) {
  if (pid <= 0) return 0;
  if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *p = strrchr(buf, ')');   /* "pid (comm) S ..." */
  return p && (p[2] == 'Z' || p[2] == 'X');
}

/* a notice from a rank that saw another go (the rank, or -1) */
/* A notice is a world rank r: r is gone; or -(r + 2): r has ended its MPI
 * (finalize: at exit, also after a Lua error) and takes part in nothing
 * more. That one is remembered (left_rank) and the next notice awaited. */
static int left_rank = -1;
static double left_at;
static double now_s(void);
static int take_notice(void) {
  for (;;) {
    int done = 0;
    char err[LN_MPI_ERRLEN];
    if (!G.notice_req) return -1;
    pthread_mutex_lock(&call_mu);
    int rc = G.shim->test(G.notice_req, &done, err);
    pthread_mutex_unlock(&call_mu);
    if (rc != 0 || !done) return -1;
    G.notice_req = NULL;
    int v = G.notice;
    if (v >= 0) return v < G.size ? v : -1;
    if (-v - 2 < G.size && left_rank < 0) { left_rank = -v - 2; left_at = now_s(); }
    pthread_mutex_lock(&call_mu);
    rc = G.shim->irecv(G.world, &G.notice, sizeof G.notice, LN_MPI_BYTE, -1, TAG_GONE, &G.notice_req, err);
    pthread_mutex_unlock(&call_mu);
    if (rc != 0) G.notice_req = NULL;
  }
}

/* A world rank known gone, or -1. Where this rank sees a peer of its host
 * end, it tells every other rank first: a rank that fails for a lost peer
 * ends soon after, and its peers must still name the first one lost. */
static int find_lost(void) {
  int l = atomic_load(&G.lost);
  if (l >= 0) return l;
  pthread_mutex_lock(&lost_mu);
  l = atomic_load(&G.lost);
  if (l < 0) l = take_notice();
  if (l < 0) l = live_poll();   /* a peer on any host whose connection ended */
  /* (LUNET_LIVENESS_ONLY: the specs watch as if every peer were on another host) */
  static int pids = -1;
  if (pids < 0) pids = getenv("LUNET_LIVENESS_ONLY") == NULL;
  for (int r = 0; pids && l < 0 && r < G.size; r++)
    if (r != G.rank && !strcmp(G.peers[r].host, G.peers[G.rank].host) && pid_gone(G.peers[r].pid)) {
      l = take_notice();   /* sent before the sender ended: prefer it */
      if (l >= 0) break;
      l = r;
      static int32_t told;
      told = r;
      for (int k = 0; k < G.size; k++) {
        void *req = NULL;
        char err[LN_MPI_ERRLEN];
        if (k != G.rank && k != r && SHIM_RC(isend(G.world, &told, sizeof told, LN_MPI_BYTE, k, TAG_GONE, &req, err)) == 0)
          G.shim->drop(req);
      }
    }
  if (l >= 0) {
    atomic_store(&G.lost, l);
    live_tell(l);   /* (this rank fails for it: its end, which follows, is not the loss) */
  }
  pthread_mutex_unlock(&lost_mu);
  return l;
}

static int gone_error(const char *fn, int r) {
  return ln_error("%s: rank %d (host %s, pid %d) is gone", fn, r, G.peers[r].host, (int)G.peers[r].pid);
}

static void on_sigterm(int sig) { got_sigterm = 1; (void)sig; }

/* ---- loading the shim, init ----------------------------------------------------- */

/* liblunet_mpi.so next to this library (LUNET_MPI_LIB overrides) */
static int load_shim(void) {
  if (G.shim) return 0;
  char path[4096];
  const char *env = getenv("LUNET_MPI_LIB");
  if (env && *env) snprintf(path, sizeof path, "%s", env);
  else {
    Dl_info info;
    if (!dladdr((void *)load_shim, &info) || !info.dli_fname)
      return ln_error("distributed: cannot find where liblunet.so is loaded from");
    snprintf(path, sizeof path, "%s", info.dli_fname);
    char *slash = strrchr(path, '/');
    size_t at = slash ? (size_t)(slash - path + 1) : 0;
    snprintf(path + at, sizeof path - at, "liblunet_mpi.so");
  }
  /* RTLD_GLOBAL: Open MPI's plugins look up libmpi's symbols globally */
  void *dl = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!dl)
    return ln_error("distributed: cannot load the MPI backend %s: %s (build it with `make` where Open MPI's "
                    "mpicc is installed: apt-get install openmpi-bin libopenmpi-dev)", path, dlerror());
  ln_mpi_shim_fn fn = (ln_mpi_shim_fn)dlsym(dl, LN_MPI_SHIM_SYMBOL);
  const ln_mpi_shim *s = fn ? fn() : NULL;
  if (!s || s->version != LN_MPI_SHIM_VERSION) {
    dlclose(dl);
    return ln_error("distributed: %s is not this lunet's MPI shim (rebuild with make)", path);
  }
  G.dl = dl;
  G.shim = s;
  return 0;
}

/* wait for req (NULL: done) as a collective of cm's group waits: liveness,
 * timeout; on a failure the request is abandoned (its buffers stay) */
static _Thread_local bool wait_failed;   /* the last failure came from wait_req */
/* Whether a wait may sleep between tests: while peers may be far away (the
 * signature exchange, a recv) a rank sleeps; once the exchange showed every
 * rank at the collective its data move at memory speed, and Open MPI's
 * non-blocking collectives progress only inside MPI_Test: a sleeping rank
 * stalls its peers (a 256 MB all-reduce ran at half MPI_Allreduce's speed). */
static _Thread_local bool data_phase;
/* the one world rank this wait needs (a ring's left neighbour, the other of
 * two, a recv's sender), or -1: when the launcher ends the job (a rank of
 * another host died) and no rank of this host is gone, that is the one */
static _Thread_local int waiting_on = -1;
static int wait_req_(const char *fn, void *req, double timeout, int64_t seq);
static int wait_req(const char *fn, void *req, double timeout, int64_t seq) {
  int rc = wait_req_(fn, req, timeout, seq);
  if (rc != 0) wait_failed = true;
  return rc;
}
/* what a wait is for, in an error: "collective #N", or for a send or a recv
 * (seq < 0, no collective number) "this send/recv" */
static const char *waiting_for(char *buf, size_t n, int64_t seq) {
  if (seq < 0) snprintf(buf, n, "this send/recv");
  else snprintf(buf, n, "collective #%lld", (long long)seq);
  return buf;
}

static int wait_req_(const char *fn, void *req, double timeout, int64_t seq) {
  char err[LN_MPI_ERRLEN], what[48];
  double start = now_s(), next_check = start + CHECK_S;
  for (long i = 0; req; i++) {
    int done = 0;
    if (SHIM_RC(test(req, &done, err)) != 0) return ln_error("%s: %s", fn, err);
    if (done) return 0;
    if (i < 2000) continue;   /* a small collective completes within microseconds */
    double t = now_s();
    if (got_sigterm || t >= next_check) {
      int r = find_lost();
      /* a rank that ended its MPI still progresses what it had begun: only
       * a wait that outlives its end by a second waits for it; a rank gone
       * since (one that failed for it) came after it */
      if (left_rank >= 0 && (r >= 0 || t - left_at > 1.0)) {
        G.shim->drop(req);
        return ln_error("%s: rank %d (host %s, pid %d) has ended (finalize: at its exit, or after an error) while "
                        "%s waits for it", fn, left_rank, G.peers[left_rank].host,
                        (int)G.peers[left_rank].pid, waiting_for(what, sizeof what, seq));
      }
      if (r >= 0) { G.shim->drop(req); return gone_error(fn, r); }
      if (got_sigterm && waiting_on >= 0) {
        G.shim->drop(req);
        return ln_error("%s: rank %d (host %s, pid %d) is gone: the launcher ends the job (SIGTERM) while "
                        "%s waits for it", fn, waiting_on, G.peers[waiting_on].host,
                        (int)G.peers[waiting_on].pid, waiting_for(what, sizeof what, seq));
      }
      if (got_sigterm) {
        G.shim->drop(req);
        return ln_error("%s: the launcher is ending the job (SIGTERM) while %s waits: a rank of "
                        "another host is gone, or the job was cancelled", fn, waiting_for(what, sizeof what, seq));
      }
      if (t - start > timeout && seq < 0 && waiting_on >= 0) {
        G.shim->drop(req);
        return ln_error("%s: timed out after %g s: rank %d (host %s, pid %d) is alive but did not take part "
                        "(dist.init{timeout = s} sets the limit)", fn, timeout, waiting_on,
                        G.peers[waiting_on].host, (int)G.peers[waiting_on].pid);
      }
      if (t - start > timeout) {
        G.shim->drop(req);
        return ln_error("%s: collective #%lld timed out after %g s: its peers are alive but did not all call it "
                        "(a rank stuck or out of step; dist.init{timeout = s} sets the limit)", fn, (long long)seq,
                        timeout);
      }
      next_check = t + CHECK_S;
    }
    if (data_phase) sched_yield();
    else if (i > 20000) usleep(i > 200000 ? 1000 : 50);
  }
  return 0;
}

/* started by mpirun / srun (MPI_Init without one would start a singleton
 * job, with helper daemons, inside whatever process asked) */
static bool launched(void) {
  static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
    if (getenv(vars[i])) return true;
  return false;
}

int ln_dist_init(double timeout_s, int *rank, int *size) {
  if (timeout_s <= 0 || timeout_s != timeout_s) return ln_error("distributed.init: timeout must be > 0 seconds, got %g", timeout_s);
  if (!G.up && !launched())
    return ln_error("distributed.init: MPI needs processes started by a launcher (mpirun -np N luajit script.lua, "
                    "srun); this one was not");
  pthread_mutex_lock(&G.mu);
  int rc = 0;
  G.timeout = timeout_s;
  if (G.down) rc = ln_error("distributed.init: MPI was finalized; it cannot start again in this process");
  else if (!G.up) {
    char err[LN_MPI_ERRLEN];
    rc = load_shim();
    if (rc == 0 && G.shim->init(&G.rank, &G.size, &G.level, err) != 0) rc = ln_error("distributed.init: %s", err);
    if (rc == 0) {
      int *all = malloc(sizeof(int) * (size_t)G.size);
      G.peers = calloc((size_t)G.size, sizeof *G.peers);
      if (!all || !G.peers) rc = ln_error("distributed.init: out of host memory");
      for (int r = 0; rc == 0 && r < G.size; r++) all[r] = r;
      if (rc == 0 && G.shim->comm_create(all, G.size, &G.world, err) != 0) rc = ln_error("distributed.init: %s", err);
      free(all);
    }
    if (rc == 0) {
      peer me;
      memset(&me, 0, sizeof me);
      if (gethostname(me.host, sizeof me.host - 1) != 0) snprintf(me.host, sizeof me.host, "?");
      me.pid = (int32_t)getpid();
      (void)live_listen(&me.live);   /* (none: this rank's peers do not watch it) */
      me.token = ((uint64_t)(uint32_t)me.pid << 32) ^ (uint64_t)(now_s() * 1e9);
      void *req = NULL;
      char err[LN_MPI_ERRLEN];
      if (G.shim->iallgather(G.world, &me, G.peers, sizeof me, LN_MPI_BYTE, &req, err) != 0)
        rc = ln_error("distributed.init: %s", err);
      else {
        G.up = true;   /* wait_req's liveness checks read the peers (zeros: unknown) */
        rc = wait_req("distributed.init", req, G.timeout, 0);
        if (rc != 0) G.up = false;
      }
      live_addr *addrs = rc == 0 ? malloc(sizeof *addrs * (size_t)G.size) : NULL;
      if (addrs) {
        for (int r = 0; r < G.size; r++) addrs[r] = G.peers[r].live;
        (void)live_connect(G.rank, G.size, addrs, G.peers[0].token, LIVE_CONNECT_S);
        free(addrs);
      }
    }
    if (rc == 0 && G.shim->irecv(G.world, &G.notice, sizeof G.notice, LN_MPI_BYTE, -1, TAG_GONE, &G.notice_req, err) != 0)
      rc = ln_error("distributed.init: %s", err);
    if (rc == 0) {
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_handler = on_sigterm;
      sigemptyset(&sa.sa_mask);
      sigaction(SIGTERM, &sa, &sigterm_old);
    }
  }
  if (rc == 0) { *rank = G.rank; *size = G.size; }
  pthread_mutex_unlock(&G.mu);
  return rc;
}

int ln_dist_peer(int rank, char *host, int hostlen, int *pid) {
  if (!G.up) return ln_error("distributed: not initialized (call distributed.init first)");
  if (rank < 0 || rank >= G.size) return ln_error("distributed: rank %d out of range 0..%d", rank, G.size - 1);
  if (host && hostlen > 0) snprintf(host, (size_t)hostlen, "%s", G.peers[rank].host);
  if (pid) *pid = G.peers[rank].pid;
  return 0;
}

static void reap_sends(bool wait);
int ln_dist_finalize(void) {
  pthread_mutex_lock(&Q.mu);   /* the async collectives queued so far end first */
  while (Q.head || Q.busy) pthread_cond_wait(&Q.done_cv, &Q.mu);
  pthread_mutex_unlock(&Q.mu);
  if (G.up && !G.down && atomic_load(&G.lost) < 0 && !got_sigterm) reap_sends(true);   /* sends in flight */
  pthread_mutex_lock(&G.mu);
  int rc = 0;
  if (G.up && !G.down) {
    char err[LN_MPI_ERRLEN];
    /* a lost rank leaves MPI unable to finalize (it would wait for it) */
    if (atomic_load(&G.lost) < 0 && !got_sigterm) {
      /* peers still waiting in a collective for this rank learn it ended */
      static int32_t bye;
      bye = -(G.rank + 2);
      for (int k = 0; k < G.size; k++) {
        void *req = NULL;
        if (k != G.rank && G.shim->isend(G.world, &bye, sizeof bye, LN_MPI_BYTE, k, TAG_GONE, &req, err) == 0)
          G.shim->drop(req);
      }
      live_bye();   /* (before MPI's finalize, which may wait: the end that follows is in order) */
      if (G.notice_req) G.shim->cancel(G.notice_req);
      G.notice_req = NULL;
      G.shim->comm_free(G.world);
      if (G.shim->finalize(err) != 0) rc = ln_error("distributed.finalize: %s", err);
    }
    live_bye();   /* (a no-op after the one above) */
    sigaction(SIGTERM, &sigterm_old, NULL);
    G.down = true;
  }
  pthread_mutex_unlock(&G.mu);
  return rc;
}

/* ---- the backend ------------------------------------------------------------------ */

typedef struct {
  void *mc[2];                 /* MPI communicators: [0] compute stream, [1] comm stream */
  int64_t nseq[2];             /* collectives issued on each (the signature's sequence) */
  int *members;                /* group rank -> world rank */
  /* set once a wait failed on that stream's communicator (timeout, lost
   * rank, MPI error): its ranks are out of step for good */
  atomic_bool broken[2];
  char why[2][600];
  /* async collectives of an inline device (the backend's own thread runs
   * them): how many were queued and done, the first failure not yet raised */
  int64_t queued, done;
  char failure[800];
} mpi_impl;


/* what every rank of a collective says it calls */
typedef struct {
  int64_t seq, numel;
  int32_t kind, op, wire, dtype, root, failed;
  char site[SITELEN];
  char failure[300];
} signature;

typedef struct {
  ln_comm *cm;
  int kind, op, wire, dtype, root, stream;
  int64_t numel, seq;
  char *a, *b;                 /* in place: a; reduce_scatter/allgather: out a, in b */
  char site[SITELEN];
} coll_args;

static int world_of(const ln_comm *cm, int r) { return ((mpi_impl *)cm->impl)->members[r]; }

static void describe(char *buf, size_t n, const ln_comm *cm, int r, const signature *s) {
  int w = world_of(cm, r);
  char what[160];
  if (s->kind == K_BARRIER) snprintf(what, sizeof what, "barrier");
  else if (s->kind == K_BROADCAST)
    snprintf(what, sizeof what, "broadcast of %lld %s elements from rank %d", (long long)s->numel,
             ln_dtype_name(s->dtype), s->root);
  else if (s->kind == K_ALLGATHER)
    snprintf(what, sizeof what, "allgather of %lld %s elements", (long long)s->numel, ln_dtype_name(s->dtype));
  else
    snprintf(what, sizeof what, "%s (%s%s%s) of %lld %s elements", kind_names[s->kind], op_names[s->op],
             s->wire >= 0 ? ", wire " : "", s->wire >= 0 ? ln_dtype_name(s->wire) : "", (long long)s->numel,
             ln_dtype_name(s->dtype));
  snprintf(buf, n, "rank %d (host %s, pid %d) calls %s at %s", r, G.peers[w].host, (int)G.peers[w].pid, what,
           s->site[0] ? s->site : "an unknown place");
}

/* the signature exchange: 0 when every rank calls the same collective */
static int agree(const char *fn, coll_args *a, mpi_impl *mi) {
  ln_comm *cm = a->cm;
  int n = cm->world, me = cm->ranks[0];
  size_t bytes = sizeof(signature) * (size_t)n;
  signature *all = malloc(bytes), mine;
  if (!all) return ln_error("%s: out of host memory", fn);
  memset(&mine, 0, sizeof mine);
  mine.seq = a->seq;
  mine.numel = a->numel;
  mine.kind = a->kind; mine.op = a->op; mine.wire = a->wire; mine.dtype = a->dtype; mine.root = a->root;
  snprintf(mine.site, sizeof mine.site, "%s", a->site);
  if (ln_stream_failed()) {
    mine.failed = 1;
    snprintf(mine.failure, sizeof mine.failure, "%s", ln_stream_failure());
  }
  void *req = NULL;
  char err[LN_MPI_ERRLEN];
  waiting_on = n == 2 ? world_of(cm, 1 - me) : -1;
  int rc = SHIM_RC(iallgather(mi->mc[a->stream], &mine, all, sizeof mine, LN_MPI_BYTE, &req, err));
  if (rc != 0) rc = ln_error("%s: %s", fn, err);
  else rc = wait_req(fn, req, G.timeout, a->seq);
  if (rc != 0) { if (req) { /* abandoned: MPI may still write it */ } else free(all); return -1; }
  for (int r = 0; r < n && rc == 0; r++) {
    signature *s = &all[r];
    int w = world_of(cm, r);
    if (s->failed) {
      if (r == me) rc = ln_error("%s: aborted on every rank: this rank failed earlier: %s", fn, s->failure);
      else
        rc = ln_error("%s: aborted: rank %d (host %s, pid %d) failed earlier: %s", fn, r, G.peers[w].host,
                      (int)G.peers[w].pid, s->failure);
    }
  }
  for (int r = 0; r < n && rc == 0; r++) {
    signature *s = &all[r];
    if (s->seq != mine.seq || s->kind != mine.kind || s->numel != mine.numel || s->dtype != mine.dtype ||
        s->root != mine.root || s->op != mine.op || s->wire != mine.wire) {
      char d0[600], d1[600];
      int lo = r < me ? r : me, hi = r < me ? me : r;
      describe(d0, sizeof d0, cm, lo, &all[lo]);
      describe(d1, sizeof d1, cm, hi, &all[hi]);
      rc = ln_error("%s: collective #%lld differs across ranks (out of step): %s; %s", fn, (long long)mine.seq,
                    d0, d1);
    }
  }
  free(all);
  return rc;
}

/* MPI element type of a reduction */
static int red_type(int dtype, int wire) {
  if (wire == LN_BFLOAT16) return LN_MPI_BF16;
  if (wire == LN_FLOAT16) return LN_MPI_F16;
  return dtype == LN_FLOAT64 ? LN_MPI_F64 : LN_MPI_F32;
}
static int red_op(int op) { return op == LN_COMM_MAX ? LN_MPI_MAX : op == LN_COMM_MIN ? LN_MPI_MIN : LN_MPI_SUM; }

static void to_wire(uint16_t *o, const float *x, int64_t n, int wire) {
  if (wire == LN_BFLOAT16) for (int64_t i = 0; i < n; i++) o[i] = ln_float_to_bf16(x[i]);
  else for (int64_t i = 0; i < n; i++) o[i] = ln_float_to_half(x[i]);
}
static void from_wire(float *o, const uint16_t *x, int64_t n, int wire) {
  if (wire == LN_BFLOAT16) for (int64_t i = 0; i < n; i++) o[i] = ln_bf16_to_float(x[i]);
  else for (int64_t i = 0; i < n; i++) o[i] = ln_half_to_float(x[i]);
}

/* avg: the sum divided by the ranks (rounded to the wire again, as local does) */
static void finish_avg(char *buf, int64_t n, int dtype, int wire, int world) {
  if (dtype == LN_FLOAT64) {
    double *x = (double *)buf;
    for (int64_t i = 0; i < n; i++) x[i] /= world;
    return;
  }
  float *x = (float *)buf, d = (float)world;
  for (int64_t i = 0; i < n; i++) x[i] /= d;
  if (wire == LN_BFLOAT16) for (int64_t i = 0; i < n; i++) x[i] = ln_bf16_to_float(ln_float_to_bf16(x[i]));
  else if (wire == LN_FLOAT16) for (int64_t i = 0; i < n; i++) x[i] = ln_half_to_float(ln_float_to_half(x[i]));
}

/* start one operation and wait for it */
#define RUN(CALL)                                                               \
  do {                                                                          \
    void *req_ = NULL;                                                          \
    if (SHIM_RC(CALL) != 0) return ln_error("%s: %s", fn, err);                \
    if (wait_req(fn, req_, G.timeout, a->seq) != 0) return -1;                 \
  } while (0)

enum { CHUNK = 1 << 30 };   /* elements per MPI call (MPI counts are int) */

/* ---- ring all-reduce ----------------------------------------------------------------
 * Open MPI 4.1's non-blocking all-reduce (libnbc) moves large buffers at
 * half the speed of its blocking MPI_Allreduce, and a blocking call cannot
 * notice a lost peer. So large all-reduces are a ring of non-blocking
 * point-to-point transfers (Open MPI's shared-memory or TCP transport; the
 * waits check the peers), reducing here: a reduce-scatter (N-1 steps: send
 * one chunk right, receive the next from the left and reduce it into place)
 * then an all-gather of the reduced chunks (N-1 steps). Every rank ends with
 * the same bits; each element is reduced in ring order from its chunk's
 * owner on (with 2 ranks, a + b as the local backend). 16-bit wires travel
 * as 16 bits and are reduced in float32, rounded at each step as on MPI's. */
enum { TAG_RING = 10, RING_MIN_BYTES = 1 << 18 };

LN_SIMD static void reduce_into(char *dst, const char *src, int64_t n, int type, int op) {
#define LOOP(T, LOAD, STORE)                                                          \
  do {                                                                                \
    T *d_ = (T *)dst;                                                                 \
    const T *s_ = (const T *)src;                                                     \
    if (op == LN_MPI_SUM) for (int64_t i = 0; i < n; i++) { float_t_ a_ = LOAD(d_[i]), b_ = LOAD(s_[i]); d_[i] = STORE(a_ + b_); } \
    else if (op == LN_MPI_MAX) for (int64_t i = 0; i < n; i++) { float_t_ a_ = LOAD(d_[i]), b_ = LOAD(s_[i]); d_[i] = STORE((b_ > a_ || b_ != b_) ? b_ : a_); } \
    else for (int64_t i = 0; i < n; i++) { float_t_ a_ = LOAD(d_[i]), b_ = LOAD(s_[i]); d_[i] = STORE((b_ < a_ || b_ != b_) ? b_ : a_); } \
  } while (0)
#define ID(x) (x)
  if (type == LN_MPI_F64) {
    typedef double float_t_;
    LOOP(double, ID, ID);
  } else if (type == LN_MPI_F32) {
    typedef float float_t_;
    LOOP(float, ID, ID);
  } else if (type == LN_MPI_BF16) {
    typedef float float_t_;
    LOOP(uint16_t, ln_bf16_to_float, ln_float_to_bf16);
  } else {
    typedef float float_t_;
    LOOP(uint16_t, ln_half_to_float, ln_float_to_half);
  }
#undef LOOP
#undef ID
}

/* send sb bytes right and receive rb bytes from the left, both done */
static int exchange(const char *fn, void *mc, const char *sbuf, size_t sb, int right, char *rbuf, size_t rb,
                    int left, int64_t seq) {
  char err[LN_MPI_ERRLEN];
  for (size_t off = 0; off < sb || off < rb; off += CHUNK) {
    void *sreq = NULL, *rreq = NULL;
    size_t ns = off < sb ? (sb - off < (size_t)CHUNK ? sb - off : (size_t)CHUNK) : 0;
    size_t nr = off < rb ? (rb - off < (size_t)CHUNK ? rb - off : (size_t)CHUNK) : 0;
    if (nr && SHIM_RC(irecv(mc, rbuf + off, (int64_t)nr, LN_MPI_BYTE, left, TAG_RING, &rreq, err)) != 0)
      return ln_error("%s: %s", fn, err);
    if (ns && SHIM_RC(isend(mc, sbuf + off, (int64_t)ns, LN_MPI_BYTE, right, TAG_RING, &sreq, err)) != 0)
      return ln_error("%s: %s", fn, err);
    if (wait_req(fn, rreq, G.timeout, seq) != 0 || wait_req(fn, sreq, G.timeout, seq) != 0) return -1;
  }
  return 0;
}

static int ring_allreduce(const char *fn, coll_args *a, void *mc, char *buf, int64_t n, int type, int op) {
  int N = a->cm->world, r = a->cm->ranks[0], right = (r + 1) % N, left = (r + N - 1) % N;
  size_t es = type == LN_MPI_F64 ? 8 : type == LN_MPI_F32 ? 4 : 2;
#define LO(k) (n * (int64_t)(k) / N)
  char *tmp = malloc((size_t)(n / N + 1) * es);
  if (!tmp) return ln_error("%s: out of host memory for a ring step (%lld bytes)", fn, (long long)((n / N + 1) * (int64_t)es));
  waiting_on = world_of(a->cm, left);
  for (int s = 0; s < N - 1; s++) {
    int sc = (r - s + 2 * N) % N, rc = (r - s - 1 + 2 * N) % N;
    if (exchange(fn, mc, buf + LO(sc) * es, (size_t)(LO(sc + 1) - LO(sc)) * es, right, tmp,
                 (size_t)(LO(rc + 1) - LO(rc)) * es, left, a->seq) != 0)
      return -1;   /* tmp stays: MPI may still write it */
    reduce_into(buf + LO(rc) * es, tmp, LO(rc + 1) - LO(rc), type, op);
  }
  free(tmp);
  for (int s = 0; s < N - 1; s++) {
    int sc = (r + 1 - s + 2 * N) % N, rc = (r - s + 2 * N) % N;
    if (exchange(fn, mc, buf + LO(sc) * es, (size_t)(LO(sc + 1) - LO(sc)) * es, right, buf + LO(rc) * es,
                 (size_t)(LO(rc + 1) - LO(rc)) * es, left, a->seq) != 0)
      return -1;
  }
#undef LO
  return 0;
}

static int run_allreduce(const char *fn, coll_args *a, mpi_impl *mi) {
  char err[LN_MPI_ERRLEN];
  void *mc = mi->mc[a->stream];
  int64_t n = a->numel;
  int type = red_type(a->dtype, a->wire);
  size_t es = type == LN_MPI_F64 ? 8 : type == LN_MPI_F32 ? 4 : 2;
  char *buf = a->a;
  uint16_t *w = NULL;
  if (a->wire >= 0) {
    w = malloc((size_t)(n ? n : 1) * 2);
    if (!w) return ln_error("%s: out of host memory for the %s wire copy (%lld elements)", fn,
                            ln_dtype_name(a->wire), (long long)n);
    to_wire(w, (const float *)a->a, n, a->wire);
    buf = (char *)w;
  }
  if (a->cm->world > 1 && (int64_t)es * n >= RING_MIN_BYTES) {
    if (ring_allreduce(fn, a, mc, buf, n, type, red_op(a->op)) != 0) return -1;   /* w stays: MPI may write it */
  } else {
    for (int64_t s = 0; s < n; s += CHUNK) {
      int64_t m = n - s < CHUNK ? n - s : CHUNK;
      void *req_ = NULL;
      if (SHIM_RC(iallreduce(mc, buf + s * es, m, type, red_op(a->op), &req_, err)) != 0) {
        free(w);
        return ln_error("%s: %s", fn, err);
      }
      if (wait_req(fn, req_, G.timeout, a->seq) != 0) return -1;
    }
  }
  if (w) {
    from_wire((float *)a->a, w, n, a->wire);
    free(w);
  }
  if (a->op == LN_COMM_AVG) finish_avg(a->a, n, a->dtype, a->wire, a->cm->world);
  return 0;
}

static int run_reduce_scatter(const char *fn, coll_args *a, mpi_impl *mi) {
  char err[LN_MPI_ERRLEN];
  void *mc = mi->mc[a->stream];
  int64_t m = a->numel, world = a->cm->world;
  if (a->wire >= 0) {
    uint16_t *w = malloc((size_t)(m * world + m) * 2);
    if (!w) return ln_error("%s: out of host memory for the %s wire copy", fn, ln_dtype_name(a->wire));
    to_wire(w, (const float *)a->b, m * world, a->wire);
    void *req_ = NULL;
    if (SHIM_RC(ireduce_scatter(mc, w, w + m * world, m, red_type(a->dtype, a->wire), red_op(a->op), &req_, err)) != 0) {
      free(w);
      return ln_error("%s: %s", fn, err);
    }
    if (wait_req(fn, req_, G.timeout, a->seq) != 0) return -1;
    from_wire((float *)a->a, w + m * world, m, a->wire);
    free(w);
  } else {
    RUN(ireduce_scatter(mc, a->b, a->a, m, red_type(a->dtype, -1), red_op(a->op), &req_, err));
  }
  if (a->op == LN_COMM_AVG) finish_avg(a->a, m, a->dtype, a->wire, (int)world);
  return 0;
}

static int coll_task(void *p) {
  coll_args *a = p;
  const char *fn = kind_names[a->kind];
  mpi_impl *mi = a->cm->impl;
  char err[LN_MPI_ERRLEN];
  wait_failed = false;
  data_phase = false;
  waiting_on = a->cm->world == 2 ? world_of(a->cm, 1 - a->cm->ranks[0]) : -1;
  int rc = atomic_load(&mi->broken[a->stream])
               ? ln_error("%s: this communicator is out of step for good: %s", fn, mi->why[a->stream])
               : agree(fn, a, mi);
  data_phase = true;
  int64_t bytes = a->numel * (int64_t)ln_dtype_size(a->dtype);
  if (rc == 0) {
    switch (a->kind) {
      case K_ALLREDUCE: rc = run_allreduce(fn, a, mi); break;
      case K_REDUCE_SCATTER: rc = run_reduce_scatter(fn, a, mi); break;
      case K_BROADCAST: {
        for (int64_t s = 0; s < bytes && rc == 0; s += CHUNK) {
          int64_t m = bytes - s < CHUNK ? bytes - s : CHUNK;
          void *req_ = NULL;
          if (SHIM_RC(ibcast(mi->mc[a->stream], a->a + s, m, LN_MPI_BYTE, a->root, &req_, err)) != 0)
            rc = ln_error("%s: %s", fn, err);
          else rc = wait_req(fn, req_, G.timeout, a->seq);
        }
        break;
      }
      case K_ALLGATHER: {
        void *req_ = NULL;
        if (SHIM_RC(iallgather(mi->mc[a->stream], a->b, a->a, bytes, LN_MPI_BYTE, &req_, err)) != 0)
          rc = ln_error("%s: %s", fn, err);
        else rc = wait_req(fn, req_, G.timeout, a->seq);
        break;
      }
      default: break;   /* barrier: the signature exchange was it */
    }
  }
  data_phase = false;
  if (rc != 0 && wait_failed && !atomic_load(&mi->broken[a->stream])) {
    snprintf(mi->why[a->stream], sizeof mi->why[0], "%s", ln_last_error());
    atomic_store(&mi->broken[a->stream], true);
  }
  if (rc != 0 && ln_stream_failed()) ln_stream_fail_from(ln_stream_failure_root());
  ln_comm_release(a->cm);
  return rc;
}

/* ---- async collectives of an inline device ---------------------------------------
 * A device that runs inline has no comm stream, yet gradient all-reduces
 * must overlap backward there too. Its data are final when the call is
 * made (every op before ran inline), so the collective goes to this
 * backend's own thread at once, which runs them in call order; wait()
 * (ln_comm_wait) blocks until this group's are done and raises the first
 * failure. */
typedef struct job { coll_args a; ln_storage *keep[2]; struct job *next; } job;

static void *async_main(void *unused) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);   /* Lua's thread takes Ctrl-C */
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  for (;;) {
    pthread_mutex_lock(&Q.mu);
    while (!Q.head) pthread_cond_wait(&Q.cv, &Q.mu);
    job *j = Q.head;
    Q.busy = true;
    Q.head = j->next;
    if (!Q.head) Q.tail = NULL;
    pthread_mutex_unlock(&Q.mu);
    ln_comm *cm = j->a.cm;
    mpi_impl *mi = cm->impl;
    ln_comm_retain(cm);            /* coll_task drops the job's reference */
    int rc = coll_task(&j->a);
    pthread_mutex_lock(&Q.mu);
    if (rc != 0 && !mi->failure[0]) snprintf(mi->failure, sizeof mi->failure, "%s", ln_last_error());
    mi->done++;
    Q.busy = false;
    pthread_cond_broadcast(&Q.done_cv);
    pthread_mutex_unlock(&Q.mu);
    for (int k = 0; k < 2; k++) if (j->keep[k]) ln_storage_release(j->keep[k]);
    free(j);
    ln_comm_release(cm);
  }
  return NULL;
}

static int async_submit(const coll_args *a, ln_tensor *x, ln_tensor *y) {
  job *j = calloc(1, sizeof *j);
  if (!j) return ln_error("%s: out of host memory", kind_names[a->kind]);
  j->a = *a;
  ln_tensor *ts[2] = {x, y};
  for (int k = 0; k < 2; k++)
    if (ts[k]) { j->keep[k] = ts[k]->storage; ln_storage_retain(ts[k]->storage); }
  pthread_mutex_lock(&Q.mu);
  if (!Q.started) {
    if (pthread_create(&Q.th, NULL, async_main, NULL) != 0) {
      pthread_mutex_unlock(&Q.mu);
      for (int k = 0; k < 2; k++) if (j->keep[k]) ln_storage_release(j->keep[k]);
      free(j);
      return ln_error("%s: cannot start the mpi backend's thread", kind_names[a->kind]);
    }
    pthread_detach(Q.th);
    Q.started = true;
  }
  ((mpi_impl *)a->cm->impl)->queued++;
  if (Q.tail) Q.tail->next = j; else Q.head = j;
  Q.tail = j;
  pthread_cond_signal(&Q.cv);
  pthread_mutex_unlock(&Q.mu);
  return 0;
}

static int mpi_wait(ln_comm *cm) {
  mpi_impl *mi = cm->impl;
  char why[800] = "";
  pthread_mutex_lock(&Q.mu);
  while (mi->done < mi->queued) pthread_cond_wait(&Q.done_cv, &Q.mu);
  if (mi->failure[0]) { snprintf(why, sizeof why, "%s", mi->failure); mi->failure[0] = 0; }
  pthread_mutex_unlock(&Q.mu);
  return why[0] ? ln_error("%s", why) : 0;
}

static int launch(ln_comm *cm, int kind, int op, int wire, int dtype, int64_t numel, int root, ln_tensor *a,
                  ln_tensor *b, bool async) {
  mpi_impl *mi = cm->impl;
  int dev = cm->devices[0];
  bool own_thread = async && !ln_device_has_comm_stream(dev);
  if (atomic_load(&G.lost) >= 0) return gone_error(kind_names[kind], atomic_load(&G.lost));
  coll_args args;
  memset(&args, 0, sizeof args);
  args.cm = cm;
  args.kind = kind; args.op = op; args.wire = wire; args.dtype = dtype; args.root = root;
  args.numel = numel;
  args.stream = async;
  args.seq = mi->nseq[async]++;
  args.a = a ? ln_data_ptr(a) : NULL;
  args.b = b ? ln_data_ptr(b) : NULL;
  snprintf(args.site, sizeof args.site, "%s", cm->site);
  cm->site[0] = 0;
  const ln_tensor *keep[2] = {a, b};
  ln_comm_retain(cm);
  if (own_thread) {
    int rc = async_submit(&args, a, b);
    if (rc != 0) ln_comm_release(cm);
    return rc;
  }
  int rc = async ? ln_comm_stream_wait_compute(dev) : 0;
  if (rc == 0)
    rc = async ? ln_launch_comm(dev, kind_names[kind], coll_task, &args, sizeof args, keep, 2, LN_TASK_ALWAYS)
               : ln_launch_flags(dev, kind_names[kind], coll_task, &args, sizeof args, keep, 2, LN_TASK_ALWAYS);
  /* an inline device ran it (and released cm); a queue that refused it did not */
  if (rc != 0 && !ln_device_is_inline(dev)) ln_comm_release(cm);
  return rc;
}

static int mpi_allreduce(ln_comm *cm, ln_tensor *const *ts, int op, int wire) {
  return launch(cm, K_ALLREDUCE, op, wire, ts[0]->dtype_id, ln_numel(ts[0]), 0, ts[0], NULL, false);
}
static int mpi_allreduce_async(ln_comm *cm, ln_tensor *const *ts, int op, int wire) {
  return launch(cm, K_ALLREDUCE, op, wire, ts[0]->dtype_id, ln_numel(ts[0]), 0, ts[0], NULL, true);
}
static int mpi_broadcast(ln_comm *cm, ln_tensor *const *ts, int root) {
  return launch(cm, K_BROADCAST, 0, -1, ts[0]->dtype_id, ln_numel(ts[0]), root, ts[0], NULL, false);
}
static int mpi_reduce_scatter(ln_comm *cm, ln_tensor *const *out, ln_tensor *const *in, int op, int wire) {
  return launch(cm, K_REDUCE_SCATTER, op, wire, in[0]->dtype_id, ln_numel(out[0]), 0, out[0], in[0], false);
}
static int mpi_allgather(ln_comm *cm, ln_tensor *const *out, ln_tensor *const *in) {
  return launch(cm, K_ALLGATHER, 0, -1, in[0]->dtype_id, ln_numel(in[0]), 0, out[0], in[0], false);
}
static int mpi_barrier(ln_comm *cm) {
  return launch(cm, K_BARRIER, 0, -1, LN_FLOAT32, 0, 0, NULL, NULL, false);
}

/* ---- send / recv -------------------------------------------------------------------- */

typedef struct {
  ln_comm *cm;
  int peer, kind;
  int64_t numel;
  int dtype;
  char *data;        /* the tensor's */
  char site[SITELEN];
} p2p_args;

typedef struct { int64_t numel; int32_t dtype, pad; } p2p_header;

/* Sends in flight: the header and a copy of the data stay until MPI is done
 * with them (a large message waits for its receiver's recv, which this
 * rank's later MPI calls progress), so that a send never waits for its
 * receiver: two ranks that each send to the other before receiving do not
 * deadlock. Freed as they complete (reap_sends), waited for at finalize. */
typedef struct psend {
  int nreq;
  void **reqs;
  char *block;               /* header, then the data */
  struct psend *next;
} psend;
static psend *sends;
static pthread_mutex_t sends_mu = PTHREAD_MUTEX_INITIALIZER;

static void psend_free(psend *q) { free(q->reqs); free(q->block); free(q); }

/* free the sends that completed; wait: wait for every one (finalize) */
static void reap_sends(bool wait) {
  pthread_mutex_lock(&sends_mu);
  for (psend **pp = &sends, *q; (q = *pp);) {
    char err[LN_MPI_ERRLEN];
    int live = 0;
    for (int k = 0; k < q->nreq; k++) {
      if (!q->reqs[k]) continue;
      int done = 0;
      if (wait) {
        if (wait_req("send", q->reqs[k], G.timeout, -1) != 0) { live = -1; break; }
        done = 1;
      } else if (SHIM_RC(test(q->reqs[k], &done, err)) != 0) done = 1;
      if (done) q->reqs[k] = NULL; else live++;
    }
    if (live < 0) break;   /* a lost peer: its buffers stay */
    if (live == 0) { *pp = q->next; psend_free(q); } else pp = &q->next;
  }
  pthread_mutex_unlock(&sends_mu);
}

static int send_task(void *p) {
  p2p_args *a = p;
  mpi_impl *mi = a->cm->impl;
  char err[LN_MPI_ERRLEN];
  int rc = 0;
  size_t bytes = ln_stream_failed() ? 0 : (size_t)a->numel * ln_dtype_size(a->dtype);
  int nchunks = (int)((bytes + CHUNK - 1) / CHUNK);
  reap_sends(false);
  psend *q = calloc(1, sizeof *q);
  if (q) { q->reqs = calloc((size_t)nchunks + 1, sizeof *q->reqs); q->block = malloc(sizeof(p2p_header) + bytes); }
  if (!q || !q->reqs || !q->block) {
    if (q) psend_free(q);
    ln_comm_release(a->cm);
    return ln_error("send: out of host memory for a copy of %zu bytes", bytes);
  }
  p2p_header h = {a->numel, a->dtype, 0};
  if (ln_stream_failed()) h.numel = -1;   /* tells the receiver this rank failed */
  waiting_on = mi->members[a->peer];
  memcpy(q->block, &h, sizeof h);
  if (bytes) memcpy(q->block + sizeof h, a->data, bytes);
  if (SHIM_RC(isend(mi->mc[0], q->block, sizeof h, LN_MPI_BYTE, a->peer, TAG_HDR, &q->reqs[0], err)) != 0)
    rc = ln_error("send: %s", err);
  q->nreq = 1;
  for (int c = 0; c < nchunks && rc == 0; c++) {
    size_t s = (size_t)c * CHUNK, m = bytes - s < (size_t)CHUNK ? bytes - s : (size_t)CHUNK;
    if (SHIM_RC(isend(mi->mc[0], q->block + sizeof h + s, (int64_t)m, LN_MPI_BYTE, a->peer, TAG_DATA,
                      &q->reqs[c + 1], err)) != 0)
      rc = ln_error("send: %s", err);
    else q->nreq = c + 2;
  }
  pthread_mutex_lock(&sends_mu);   /* (kept even on an error: started ones may be in flight) */
  q->next = sends;
  sends = q;
  pthread_mutex_unlock(&sends_mu);
  ln_comm_release(a->cm);
  return rc;
}

static int recv_task(void *p) {
  p2p_args *a = p;
  mpi_impl *mi = a->cm->impl;
  char err[LN_MPI_ERRLEN];
  int rc = 0;
  const char *fn = "recv";
  p2p_header h;
  void *req_ = NULL;
  int w = mi->members[a->peer];
  waiting_on = w;
  if (SHIM_RC(irecv(mi->mc[0], &h, sizeof h, LN_MPI_BYTE, a->peer, TAG_HDR, &req_, err)) != 0)
    rc = ln_error("recv: %s", err);
  else rc = wait_req(fn, req_, G.timeout, -1);
  if (rc == 0 && h.numel < 0)
    rc = ln_error("recv: aborted: sender rank %d (host %s, pid %d) failed earlier", a->peer, G.peers[w].host,
                  (int)G.peers[w].pid);
  if (rc == 0 && (h.numel != a->numel || h.dtype != a->dtype)) {
    /* take the data anyway (the next recv must not get it), then fail */
    size_t bytes = (size_t)h.numel * ln_dtype_size(h.dtype);
    char *scratch = malloc(bytes ? bytes : 1);
    if (scratch && bytes) {
      req_ = NULL;
      if (SHIM_RC(irecv(mi->mc[0], scratch, (int64_t)bytes, LN_MPI_BYTE, a->peer, TAG_DATA, &req_, err)) == 0 &&
          wait_req(fn, req_, G.timeout, -1) == 0)
        free(scratch);
    } else free(scratch);
    rc = ln_error("recv: the send from rank %d has %lld %s elements, the receiving tensor %lld %s", a->peer,
                  (long long)h.numel, ln_dtype_name(h.dtype), (long long)a->numel, ln_dtype_name(a->dtype));
  } else if (rc == 0) {
    size_t bytes = (size_t)a->numel * ln_dtype_size(a->dtype);
    for (size_t s = 0; s < bytes && rc == 0; s += CHUNK) {
      size_t m = bytes - s < (size_t)CHUNK ? bytes - s : (size_t)CHUNK;
      req_ = NULL;
      if (SHIM_RC(irecv(mi->mc[0], a->data + s, (int64_t)m, LN_MPI_BYTE, a->peer, TAG_DATA, &req_, err)) != 0)
        rc = ln_error("recv: %s", err);
      else rc = wait_req(fn, req_, G.timeout, -1);
    }
  }
  ln_comm_release(a->cm);
  return rc;
}

static int p2p(ln_comm *cm, const ln_tensor *t, int peer_rank, int kind) {
  int dev = cm->devices[0];
  if (peer_rank == cm->ranks[0])
    return ln_error("%s: rank %d cannot %s itself", kind_names[kind], peer_rank, kind == K_SEND ? "send to" : "receive from");
  if (atomic_load(&G.lost) >= 0) return gone_error(kind_names[kind], atomic_load(&G.lost));
  p2p_args a;
  memset(&a, 0, sizeof a);
  a.cm = cm; a.peer = peer_rank; a.kind = kind; a.numel = ln_numel(t); a.dtype = t->dtype_id;
  a.data = ln_data_ptr(t);
  const ln_tensor *keep[1] = {t};
  ln_comm_retain(cm);
  int rc = ln_launch_flags(dev, kind_names[kind], kind == K_SEND ? send_task : recv_task, &a, sizeof a, keep, 1,
                           kind == K_SEND ? LN_TASK_ALWAYS : 0);
  if (rc != 0 && !ln_device_is_inline(dev)) ln_comm_release(cm);
  return rc;
}

static int mpi_send(ln_comm *cm, const ln_tensor *t, int local, int dst) { return p2p(cm, t, dst, K_SEND); }
static int mpi_recv(ln_comm *cm, ln_tensor *t, int local, int src) { return p2p(cm, t, src, K_RECV); }

/* ---- init / destroy ----------------------------------------------------------------- */

/* cfg->rendezvous: the group's members, world (process) ranks "0,2,3" in
 * group rank order (NULL: every process) */
static int mpi_init(ln_comm *cm, const ln_comm_config *cfg) {
  if (!G.up) {
    int r, s;
    if (!launched())
      return ln_error("comm_new: backend 'mpi' needs processes started by a launcher (mpirun -np N luajit "
                      "script.lua, srun); this one was not");
    if (ln_dist_init(G.timeout, &r, &s) != 0) return -1;
  }
  if (G.down) return ln_error("comm_new: MPI was finalized (distributed.finalize)");
  if (cm->nlocal != 1)
    return ln_error("comm_new: the mpi backend holds one rank per process (one device), got %d devices", cm->nlocal);
  mpi_impl *mi = calloc(1, sizeof *mi);
  int *members = malloc(sizeof(int) * (size_t)G.size);
  if (!mi || !members) { free(mi); free(members); return ln_error("comm_new: out of host memory"); }
  int n = 0, me = -1;
  const char *s = cfg->rendezvous;
  if (!s || !*s) {
    for (n = 0; n < G.size; n++) members[n] = n;
  } else {
    while (*s) {
      char *end;
      long v = strtol(s, &end, 10);
      if (end == s || v < 0 || v >= G.size) {
        free(mi); free(members);
        return ln_error("comm_new: mpi group '%s': need process ranks 0..%d separated by commas", cfg->rendezvous,
                        G.size - 1);
      }
      for (int k = 0; k < n; k++)
        if (members[k] == v) {
          free(mi); free(members);
          return ln_error("comm_new: mpi group '%s' lists process rank %ld twice", cfg->rendezvous, v);
        }
      if (n == G.size) { free(mi); free(members); return ln_error("comm_new: mpi group '%s' is too long", cfg->rendezvous); }
      members[n++] = (int)v;
      s = *end == ',' ? end + 1 : end;
      if (*end && *end != ',') { free(mi); free(members); return ln_error("comm_new: mpi group '%s': bad separator", cfg->rendezvous); }
    }
  }
  for (int k = 0; k < n; k++) if (members[k] == G.rank) me = k;
  if (me < 0) {
    free(mi); free(members);
    return ln_error("comm_new: this process (rank %d) is not in the mpi group '%s'", G.rank, cfg->rendezvous);
  }
  if (cfg->world_size && cfg->world_size != n) {
    free(mi); free(members);
    return ln_error("comm_new: world size %d, but the mpi group has %d processes", cfg->world_size, n);
  }
  if (cfg->ranks && cfg->ranks[0] != me) {
    free(mi); free(members);
    return ln_error("comm_new: rank %d given, but this process is rank %d of the mpi group", cfg->ranks[0], me);
  }
  char err[LN_MPI_ERRLEN];
  for (int k = 0; k < 2; k++)
    if (SHIM_RC(comm_create(members, n, &mi->mc[k], err)) != 0) {
      if (k) SHIM(comm_free(mi->mc[0]));
      free(mi); free(members);
      return ln_error("comm_new: %s", err);
    }
  mi->members = members;
  cm->world = n;
  cm->ranks[0] = me;
  cm->impl = mi;
  return 0;
}

static void mpi_destroy(ln_comm *cm) {
  mpi_impl *mi = cm->impl;
  /* after a lost rank or finalize, MPI cannot free communicators */
  if (!G.down && atomic_load(&G.lost) < 0 && !got_sigterm)
    for (int k = 0; k < 2; k++) SHIM(comm_free(mi->mc[k]));
  free(mi->members);
  free(mi);
}

const ln_comm_backend ln_comm_mpi_backend = {
  .name = "mpi",
  .init = mpi_init,
  .destroy = mpi_destroy,
  .allreduce = mpi_allreduce,
  .allreduce_async = mpi_allreduce_async,
  .broadcast = mpi_broadcast,
  .reduce_scatter = mpi_reduce_scatter,
  .allgather = mpi_allgather,
  .send = mpi_send,
  .recv = mpi_recv,
  .barrier = mpi_barrier,
  .wait = mpi_wait,
};
