// Linux calls that Glibc's Swift module map hides behind _GNU_SOURCE. Thin pass-throughs; they can go
// when the module map exposes them.
#ifndef SINKI_CSYSTEMSHIM_H
#define SINKI_CSYSTEMSHIM_H
int sinki_syncfs(int fd);
/// renameat2 with RENAME_NOREPLACE: fails with EEXIST instead of replacing the target.
int sinki_rename_noreplace(int olddirfd, const char *oldpath, int newdirfd, const char *newpath);
#endif
