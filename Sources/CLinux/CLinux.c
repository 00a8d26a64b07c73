#define _GNU_SOURCE
#include "CLinux.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <linux/capability.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <endian.h>
#include <stdint.h>
#include <linux/posix_acl.h>
#include <linux/posix_acl_xattr.h>
#include <unistd.h>

int busymate_set_no_new_privs(void) { return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); }
int busymate_get_no_new_privs(void) { return prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); }
int busymate_setresuid(uid_t r, uid_t e, uid_t s) { return setresuid(r, e, s); }
int busymate_setresgid(gid_t r, gid_t e, gid_t s) { return setresgid(r, e, s); }
int busymate_getresuid(uid_t *r, uid_t *e, uid_t *s) { return getresuid(r, e, s); }
int busymate_setgroups1(gid_t gid) { return setgroups(1, &gid); }

int busymate_cap_last_cap(void) {
    int last = -1;
    FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
    if (f) {
        if (fscanf(f, "%d", &last) != 1) last = -1;
        fclose(f);
    }
    if (last >= 0) return last;
    // No /proc: the bounding set answers EINVAL past the last capability.
    int cap = 0;
    while (cap < 1024 && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0) cap++;
    return cap - 1;
}

int busymate_capbset_drop_all(int *failed_cap) {
    int last = busymate_cap_last_cap();
    for (int cap = 0; cap <= last; cap++) {
        int in_set = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
        if (in_set < 0) {
            if (errno == EINVAL) break;  // the kernel knows fewer than /proc said
            *failed_cap = cap;
            return -1;
        }
        if (in_set == 0) continue;  // already gone: no CAP_SETPCAP needed for it
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
            *failed_cap = cap;
            return -1;
        }
    }
    return 0;
}

int busymate_capbset_first(void) {
    for (int cap = 0; cap < 1024; cap++) {
        int in_set = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
        if (in_set < 0) return errno == EINVAL ? -1 : cap;
        if (in_set > 0) return cap;
    }
    return -1;
}

int busymate_ambient_clear_all(void) {
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) == 0) return 0;
    return errno == EINVAL ? 0 : -1;  // EINVAL: a kernel before 4.3 has no ambient set
}

int busymate_caps_clear_all(void) {
    struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
    memset(data, 0, sizeof data);
    if (syscall(SYS_capset, &header, data) != 0) return -1;
    memset(data, 0xff, sizeof data);
    header.version = _LINUX_CAPABILITY_VERSION_3;
    header.pid = 0;
    if (syscall(SYS_capget, &header, data) != 0) return -1;
    for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++) {
        if (data[i].effective || data[i].permitted || data[i].inheritable) {
            errno = EPERM;
            return -1;
        }
    }
    return 0;
}

pid_t busymate_spawn(const char *path, char *const argv[], char *const envp[], const int *fds, int nfds) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    int rc = posix_spawn_file_actions_init(&actions);
    if (rc != 0) return -rc;
    rc = posix_spawnattr_init(&attr);
    if (rc != 0) { posix_spawn_file_actions_destroy(&actions); return -rc; }

    // Move the sources out of the way first, so that dup2 onto 3+i cannot
    // clobber a source that happens to sit there; above every source, or a
    // move could land on a source not moved yet (two listeners on 21 and 22
    // became two copies of one).
    int base = 3 + nfds;
    for (int i = 0; i < nfds; i++) if (fds[i] + 1 > base) base = fds[i] + 1;
    for (int i = 0; i < nfds && rc == 0; i++) rc = posix_spawn_file_actions_adddup2(&actions, fds[i], base + i);
    for (int i = 0; i < nfds && rc == 0; i++) rc = posix_spawn_file_actions_adddup2(&actions, base + i, 3 + i);
    if (rc == 0) rc = posix_spawn_file_actions_addclosefrom_np(&actions, 3 + nfds);

    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    if (rc == 0) rc = posix_spawnattr_setsigdefault(&attr, &all);
    if (rc == 0) rc = posix_spawnattr_setsigmask(&attr, &none);
    // Its own process group: a Ctrl-C meant for the supervisor must not hit
    // the tunnel, which the supervisor stops gracefully itself.
    if (rc == 0) rc = posix_spawnattr_setpgroup(&attr, 0);
    if (rc == 0) rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);

    pid_t pid = -1;
    if (rc == 0) rc = posix_spawn(&pid, path, &actions, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    return rc == 0 ? pid : -rc;
}

#include <fcntl.h>
#include <sys/socket.h>

int busymate_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }
int busymate_accept_cloexec(int fd) { return accept4(fd, NULL, NULL, SOCK_CLOEXEC); }
int busymate_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
    *pid = cred.pid;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
}

int busymate_usable_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

int busymate_open_beneath(int dirfd, const char *name) {
    struct open_how how = {
        .flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK,
        .mode = 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    long fd = syscall(SYS_openat2, dirfd, name, &how, sizeof how);
    if (fd >= 0 || errno != ENOSYS) return (int)fd;
    if (strchr(name, '/') != NULL) {
        errno = EXDEV;
        return -1;
    }
    return openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
}

int busymate_open_socket_file(const char *path) {
    int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISSOCK(st.st_mode) || st.st_nlink != 1) {
        close(fd);
        errno = S_ISLNK(st.st_mode) ? ELOOP : S_ISSOCK(st.st_mode) ? EMLINK : ENOTSOCK;
        return -1;
    }
    return fd;
}

int busymate_acl_owner_and_reader(int fd, uid_t reader) {
    struct {
        struct posix_acl_xattr_header header;
        struct posix_acl_xattr_entry entries[5];
    } acl;
    const struct { unsigned tag, perm; uint32_t id; } wanted[5] = {
        {ACL_USER_OBJ, ACL_READ | ACL_WRITE, (uint32_t)ACL_UNDEFINED_ID},
        {ACL_USER, ACL_READ, reader},
        {ACL_GROUP_OBJ, 0, (uint32_t)ACL_UNDEFINED_ID},
        {ACL_MASK, ACL_READ, (uint32_t)ACL_UNDEFINED_ID},
        {ACL_OTHER, 0, (uint32_t)ACL_UNDEFINED_ID},
    };
    acl.header.a_version = htole32(POSIX_ACL_XATTR_VERSION);
    for (int i = 0; i < 5; i++) {
        acl.entries[i].e_tag = htole16(wanted[i].tag);
        acl.entries[i].e_perm = htole16(wanted[i].perm);
        acl.entries[i].e_id = htole32(wanted[i].id);
    }
    return fsetxattr(fd, "system.posix_acl_access", &acl, sizeof acl, 0);
}

int busymate_idle_thread(void) {
    struct sched_param param = { .sched_priority = 0 };
    // pid 0: the calling thread, not the whole process.
    return sched_setscheduler(0, SCHED_IDLE, &param);
}

#ifndef BUSYMATE_COMMIT
#define BUSYMATE_COMMIT "unknown"
#endif

const char *busymate_build_commit(void) { return BUSYMATE_COMMIT; }
