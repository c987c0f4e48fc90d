// Socket calls whose types Glibc's Swift module map hides behind _GNU_SOURCE (struct ucred).
// A thin pass-through; it can go when the module map exposes them.
#ifndef SINKI_CSOCKETSHIM_H
#define SINKI_CSOCKETSHIM_H
#include <sys/types.h>
/// The process id and user id of the peer of a connected Unix socket (SO_PEERCRED).
/// Returns 0, or -1 with errno.
int sinki_peer_credentials(int fd, pid_t *pid, uid_t *uid);
#endif
