#ifndef BUSYMATE_CLINUX_H
#define BUSYMATE_CLINUX_H
#include <sys/types.h>

/// prctl(PR_SET_NO_NEW_PRIVS, 1): prctl is variadic, so Swift cannot call it.
int busymate_set_no_new_privs(void);
int busymate_get_no_new_privs(void);

int busymate_setresuid(uid_t r, uid_t e, uid_t s);
int busymate_setresgid(gid_t r, gid_t e, gid_t s);
int busymate_getresuid(uid_t *r, uid_t *e, uid_t *s);
int busymate_setgroups1(gid_t gid);

/// Spawns `path` with `fds[i]` as descriptor 3+i, nothing else above 2, in
/// its own process group and with default signal handling. Returns the pid,
/// or -errno.
pid_t busymate_spawn(const char *path, char *const argv[], char *const envp[], const int *fds, int nfds);



int busymate_pipe_cloexec(int fds[2]);
int busymate_accept_cloexec(int fd);
/// SO_PEERCRED: `struct ucred` is GNU-only in the headers Swift sees.
int busymate_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);
/// CPUs this process may run on (sched_getaffinity, which taskset and
/// systemd's CPUAffinity= set); at least 1.
int busymate_usable_cpus(void);
#endif
