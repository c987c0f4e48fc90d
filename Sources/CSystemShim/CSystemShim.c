#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <sys/vfs.h>
#include "CSystemShim.h"

int sinki_syncfs(int fd) { return syncfs(fd); }
int sinki_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return renameat2(olddirfd, oldpath, newdirfd, newpath, RENAME_NOREPLACE);
}

int sinki_rename_exchange(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return renameat2(olddirfd, oldpath, newdirfd, newpath, RENAME_EXCHANGE);
}

int sinki_openat_beneath(int dirfd, const char *path, int flags, mode_t mode) {
    struct open_how how = {0};
    how.flags = (unsigned long long)flags;
    // O_TMPFILE includes O_DIRECTORY's bit, so it must be tested whole.
    how.mode = ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) ? mode : 0;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

int sinki_open_anonymous(int dirfd, int flags, mode_t mode) {
    return openat(dirfd, ".", O_TMPFILE | flags, mode);
}

int sinki_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }
int sinki_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }
int sinki_spawn_addchdir(posix_spawn_file_actions_t *actions, const char *path) {
    return posix_spawn_file_actions_addchdir_np(actions, path);
}
int sinki_spawn_addclosefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

int sinki_malloc_trim(void) { return malloc_trim(0); }
int sinki_malloc_arena_max(int arenas) { return mallopt(M_ARENA_MAX, arenas); }
int sinki_malloc_mmap_threshold(int bytes) { return mallopt(M_MMAP_THRESHOLD, bytes); }

int sinki_reserve_blocks(int fd, long long offset, long long length) {
    return fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)length);
}

int sinki_start_writeback(int fd, long long offset, long long length) {
    return sync_file_range(fd, (off_t)offset, (off_t)length, SYNC_FILE_RANGE_WRITE);
}

int sinki_open_entry(int dirfd, const char *name) {
    return openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
}

// Extended attributes through /proc/self/fd/N: the f*xattr calls refuse an O_PATH descriptor, and
// the /proc name reaches the very inode the descriptor holds (the callers check it is a regular file,
// so no symlink is followed from there).
static void sinki_fd_path(int fd, char out[32]) { snprintf(out, 32, "/proc/self/fd/%d", fd); }

// Reading goes through the descriptor itself first: an open file (the scan reads a file's attributes
// on the descriptor it read the content from) spares the /proc path's walk; an O_PATH one answers
// EBADF and takes the /proc name.
long sinki_list_xattrs(int fd, char *list, unsigned long size) {
    long got = flistxattr(fd, list, size);
    if (got >= 0 || errno != EBADF) return got;
    char path[32];
    sinki_fd_path(fd, path);
    return listxattr(path, list, size);
}

long sinki_get_xattr(int fd, const char *name, void *value, unsigned long size) {
    long got = fgetxattr(fd, name, value, size);
    if (got >= 0 || errno != EBADF) return got;
    char path[32];
    sinki_fd_path(fd, path);
    return getxattr(path, name, value, size);
}

int sinki_set_xattr(int fd, const char *name, const void *value, unsigned long size) {
    char path[32];
    sinki_fd_path(fd, path);
    return setxattr(path, name, value, size, 0);
}

int sinki_remove_xattr(int fd, const char *name) {
    char path[32];
    sinki_fd_path(fd, path);
    return removexattr(path, name);
}

int sinki_path_only_flag(void) { return O_PATH; }

long sinki_file_system_type(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return (long)info.f_type;
}
