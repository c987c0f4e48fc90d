// Linux calls that Glibc's Swift module map hides behind _GNU_SOURCE. Thin pass-throughs; they can go
// when the module map exposes them.
#ifndef SINKI_CSYSTEMSHIM_H
#define SINKI_CSYSTEMSHIM_H
int sinki_syncfs(int fd);
/// renameat2 with RENAME_NOREPLACE: fails with EEXIST instead of replacing the target.
int sinki_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
#include <sys/types.h>
/// openat2 confined to `dirfd`: no `..` escape, no symlink anywhere in `path` (ELOOP/EXDEV instead).
/// Returns -1 with errno ENOSYS on kernels before 5.6, where callers walk components themselves.
int sinki_openat_beneath(int dirfd, const char *path, int flags, mode_t mode);
#endif
