#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include "CSystemShim.h"

int sinki_syncfs(int fd) { return syncfs(fd); }
int sinki_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath) {
    return renameat2(olddirfd, oldpath, newdirfd, newpath, RENAME_NOREPLACE);
}

int sinki_openat_beneath(int dirfd, const char *path, int flags, mode_t mode) {
    struct open_how how = {0};
    how.flags = (unsigned long long)flags;
    // O_TMPFILE includes O_DIRECTORY's bit, so it must be tested whole.
    how.mode = ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) ? mode : 0;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}
