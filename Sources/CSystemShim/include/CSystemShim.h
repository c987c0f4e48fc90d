// Linux calls that Glibc's Swift module map hides behind _GNU_SOURCE. Thin pass-throughs; they can go
// when the module map exposes them.
#ifndef SINKI_CSYSTEMSHIM_H
#define SINKI_CSYSTEMSHIM_H
int sinki_syncfs(int fd);
/// renameat2 with RENAME_NOREPLACE: fails with EEXIST instead of replacing the target.
int sinki_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
/// renameat2 with RENAME_EXCHANGE: the two entries trade places in one step (both must exist).
int sinki_rename_exchange(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
#include <sys/types.h>
/// openat2 confined to `dirfd`: no `..` escape, no symlink anywhere in `path` (ELOOP/EXDEV instead).
/// Returns -1 with errno ENOSYS on kernels before 5.6, where callers walk components themselves.
int sinki_openat_beneath(int dirfd, const char *path, int flags, mode_t mode);
/// openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC): the entry itself, a symlink not followed.
int sinki_open_entry(int dirfd, const char *name);
/// O_PATH: a descriptor of the entry itself, for fstat and /proc/self/fd calls only.
int sinki_path_only_flag(void);
/// An unnamed regular file in directory `dirfd` (O_TMPFILE), to be linked under a name when complete.
int sinki_open_anonymous(int dirfd, int flags, mode_t mode);
#include <spawn.h>
/// pidfd_open(2): a descriptor that polls readable when the process exits (Linux 5.3).
int sinki_pidfd_open(pid_t pid);
/// pipe2(2) with O_CLOEXEC, so no other child inherits the pipe between pipe() and fcntl().
int sinki_pipe_cloexec(int fds[2]);
/// posix_spawn file actions that glibc declares only under _GNU_SOURCE: change the child's working
/// folder, and close every descriptor from `from` up.
int sinki_spawn_addchdir(posix_spawn_file_actions_t *actions, const char *path);
int sinki_spawn_addclosefrom(posix_spawn_file_actions_t *actions, int from);
/// malloc_trim(0), mallopt(M_ARENA_MAX, n) and mallopt(M_MMAP_THRESHOLD, n): <malloc.h> is not in the Glibc module.
int sinki_malloc_trim(void);
int sinki_malloc_arena_max(int arenas);
int sinki_malloc_mmap_threshold(int bytes);
/// fallocate(FALLOC_FL_KEEP_SIZE): blocks for `length` bytes at `offset`, the file's size unchanged.
int sinki_reserve_blocks(int fd, long long offset, long long length);
/// sync_file_range(SYNC_FILE_RANGE_WRITE): starts writing back a range, without waiting for it.
int sinki_start_writeback(int fd, long long offset, long long length);
/// Extended attributes of the inode `fd` holds (an O_PATH descriptor too), as listxattr(2),
/// getxattr(2), setxattr(2) and removexattr(2) on its /proc/self/fd name. Only for regular files.
long sinki_list_xattrs(int fd, char *list, unsigned long size);
long sinki_get_xattr(int fd, const char *name, void *value, unsigned long size);
int sinki_set_xattr(int fd, const char *name, const void *value, unsigned long size);
int sinki_remove_xattr(int fd, const char *name);
/// statfs(2)'s f_type of the file system holding `path` (NFS_SUPER_MAGIC, say); -1 with errno on failure.
long sinki_file_system_type(const char *path);
#endif
