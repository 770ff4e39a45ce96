/* liveness.h -- which peer process is gone, across hosts, within a poll.
 *
 * Each rank of an MPI job holds a TCP connection to every other rank. The
 * kernel closes a process's sockets however it ends (SIGKILL included), so
 * a connection that ends, without the "bye" an orderly finalize sends
 * first, names the rank that is gone: on any host, before the launcher
 * (which ends the job about a second after a death) kills the others. MPI
 * itself only says that something failed, and lunet's other check (the
 * pids of the peers of its own host) cannot see another host.
 *
 *   live_addr me;
 *   live_listen(&me);                         (before the exchange)
 *   ... every rank's live_addr exchanged (mpi.c's allgather at init) ...
 *   live_connect(rank, size, all, token, 5.0);
 *   int r = live_poll();                      (a rank gone, or -1; never blocks)
 *   live_tell(r);                             (before failing for it)
 *   live_bye();                               (at finalize: an orderly end)
 *
 * Nothing here is needed for correctness: a peer that cannot be reached
 * (no route, a firewall) is left unwatched, and the job runs as before. */
#ifndef LN_COMM_LIVENESS_H
#define LN_COMM_LIVENESS_H
#include <stdint.h>

enum { LIVE_ADDRS = 4 };

/* where a rank listens: a TCP port and up to LIVE_ADDRS IPv4 addresses of
 * its host (network byte order; unused ones 0) */
typedef struct {
  uint32_t addr[LIVE_ADDRS];
  uint16_t port;
  uint16_t pad;
} live_addr;

/* opens this rank's listening socket (every interface, a free port) and
 * fills me; 0, or -1 (then me->port is 0: nobody connects, nothing watched) */
int live_listen(live_addr *me);

/* connects to every other rank: to the lower ranks (trying their addresses
 * in turn, each connection checked by a hello carrying token and both
 * ranks), and accepts the higher ranks', for at most timeout_s in all.
 * Returns how many peers are watched. */
int live_connect(int rank, int size, const live_addr *all, uint64_t token, double timeout_s);

/* a watched rank whose connection ended without a bye, or -1 */
int live_poll(void);

/* tells every watched peer that rank gone is gone (this rank will fail for
 * it: its own end that follows is not the loss to name) */
void live_tell(int gone);

/* tells every watched peer this rank ends in order, and closes the connections */
void live_bye(void);

#endif
