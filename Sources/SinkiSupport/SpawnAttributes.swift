import Glibc

/// `posix_spawn` attributes for a program that must start with signals as a fresh one expects them:
/// nothing blocked and every handler at its default, whatever the spawning thread blocks or ignores
/// (the agent blocks SIGTERM on its main thread and ignores SIGPIPE).
public enum SpawnAttributes {
    /// Calls `body` with such attributes, the child in a process group of its own when `ownGroup` (so a
    /// timeout can kill what it started too); returns what `body` returns (posix_spawn's status).
    public static func withFreshSignals(ownGroup: Bool, _ body: (UnsafePointer<posix_spawnattr_t>) -> Int32) -> Int32 {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        if ownGroup {
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= POSIX_SPAWN_SETPGROUP
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))
        return body(&attributes)
    }
}
