import CSystemShim
import SinkiSupport

extension Agent {
    /// Hands freed heap back to the system after a burst of work. Hashing and compressing fan out
    /// over Dispatch's threads, each with its own malloc arena; without this, an agent that once
    /// scanned 100,000 files keeps hundreds of MiB it no longer uses.
    func trimMemory() {
        let now = Clock.monotonic()
        guard now - lastTrim > 5_000_000_000 else { return }
        lastTrim = now
        _ = sinki_malloc_trim()
    }

    /// Fewer malloc arenas than glibc's default (8 per core): the agent's parallel work is short
    /// bursts, and every arena keeps its own high-water mark.
    static func limitMallocArenas() {
        _ = sinki_malloc_arena_max(2)
    }
}
