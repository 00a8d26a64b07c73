#ifndef BUSYMATE_CLINUX_H
#define BUSYMATE_CLINUX_H
#include <sys/types.h>

/// The commit the binary was built from (Package.swift's BUSYMATE_COMMIT).
const char *busymate_build_commit(void);

/// prctl(PR_SET_NO_NEW_PRIVS, 1): prctl is variadic, so Swift cannot call it.
int busymate_set_no_new_privs(void);
int busymate_get_no_new_privs(void);

int busymate_setresuid(uid_t r, uid_t e, uid_t s);
int busymate_setresgid(gid_t r, gid_t e, gid_t s);
int busymate_getresuid(uid_t *r, uid_t *e, uid_t *s);
int busymate_setgroups1(gid_t gid);

/// The highest capability number the running kernel knows
/// (/proc/sys/kernel/cap_last_cap; probed with PR_CAPBSET_READ without /proc).
int busymate_cap_last_cap(void);
/// Empties the capability bounding set: PR_CAPBSET_DROP for every capability
/// still in it, up to the kernel's last one. Needs CAP_SETPCAP in the
/// effective set, so it goes while still root. Returns 0, or -1 with errno
/// set and `*failed_cap` the capability that could not be dropped.
int busymate_capbset_drop_all(int *failed_cap);
/// The lowest capability still in the bounding set, or -1 when it is empty
/// (every capability the kernel knows, past cap_last_cap too).
int busymate_capbset_first(void);
/// PR_CAP_AMBIENT_CLEAR_ALL; 0 on kernels without ambient capabilities.
int busymate_ambient_clear_all(void);
/// capset(2) with empty effective, permitted and inheritable sets (lowering
/// needs no privilege), then capget(2) to check they are empty: 0, or -1
/// with errno set (EPERM when a set is still not empty).
int busymate_caps_clear_all(void);

/// Spawns `path` with `fds[i]` as descriptor 3+i, nothing else above 2, in
/// its own process group and with default signal handling. Returns the pid,
/// or -errno.
pid_t busymate_spawn(const char *path, char *const argv[], char *const envp[], const int *fds, int nfds);



int busymate_pipe_cloexec(int fds[2]);
int busymate_accept_cloexec(int fd);
/// SO_PEERCRED: `struct ucred` is GNU-only in the headers Swift sees.
int busymate_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);
/// Opens `name` in `dirfd` for reading only if it lies beneath it and no
/// link is on the way: openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
/// RESOLVE_NO_MAGICLINKS), O_NONBLOCK so a FIFO cannot stall the caller.
/// On a kernel without openat2 a name with a '/' is refused (EXDEV) and the
/// rest opened with O_NOFOLLOW, which is the same for a single component.
int busymate_open_beneath(int dirfd, const char *name);
/// An O_PATH descriptor for the Unix socket file at `path`, to connect or
/// send to through /proc/self/fd/N: a symbolic link is refused (ELOOP),
/// anything but a socket too (ENOTSOCK), and so is a socket file with a
/// second hard link (EMLINK: someone else's socket linked in).
int busymate_open_socket_file(const char *path);
/// CPUs this process may run on (sched_getaffinity, which taskset and
/// systemd's CPUAffinity= set); at least 1.
int busymate_usable_cpus(void);
/// A POSIX access ACL on `fd`: the owner reads and writes, user `reader`
/// reads, nobody else (no group, mask r, no other). 0, or -1 with errno
/// (EOPNOTSUPP on a file system without ACLs).
int busymate_acl_owner_and_reader(int fd, uid_t reader);
/// Puts the calling thread (only it) in SCHED_IDLE: it runs when its
/// core has nothing else to run. 0, or -1 with errno.
int busymate_idle_thread(void);
#endif
