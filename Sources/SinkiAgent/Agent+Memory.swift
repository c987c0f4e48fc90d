import CSystemShim
import SinkiSupport

extension Agent {
    /// Hands freed heap back to the system after a burst of work. Hashing and compressing fan out
    /// over Dispatch's threads, each with its own malloc arena; without this, an agent that once
    /// scanned 100,000 files keeps hundreds of MiB it no longer uses.
    func trimMemory() {
        let now = Clock.monotonic()
        guard now - lastTrim > Self.trimSpacing else {
            // Too soon after the last: once, when the spacing is over, or the end of a burst that came
            // just after a trim would keep its memory until the next burst (an idle agent at a million
            // files stayed at 245 MiB).
            guard !trimScheduled, let sleeper else { return }
            trimScheduled = true
            let wait = UInt64((lastTrim + Self.trimSpacing - now) / 1_000_000) + 1
            Task {
                _ = await sleeper.sleep(milliseconds: wait)
                trimScheduled = false
                trimMemory()
            }
            return
        }
        lastTrim = now
        _ = sinki_malloc_trim()
    }

    /// At most one trim this often: a trim after a burst of a million allocations takes a while.
    static let trimSpacing: Int64 = 5_000_000_000

    /// Fewer malloc arenas than glibc's default (8 per core): the agent's parallel work is short
    /// bursts, and every arena keeps its own high-water mark.
    ///
    /// And a fixed mmap threshold above the largest chunk (2 MiB, grown by appends to at most 4 MiB):
    /// glibc's own threshold climbs as mapped blocks are freed, and then the chunks of a large file
    /// come from the heap in whatever sizes and places are free, so an agent sending 1 GiB held
    /// 120–143 MiB. Fixed, every chunk is taken from and given back to the same heap, which stays
    /// about two batches large (a threshold as low as glibc's first 128 KiB held 66 MiB, but mapped
    /// every chunk afresh: a page fault per 4 KiB, 0.7 s more CPU per GiB).
    static func limitMallocArenas() {
        _ = sinki_malloc_arena_max(2)
        _ = sinki_malloc_mmap_threshold(Self.mmapThreshold)
    }

    static let mmapThreshold: Int32 = (4 << 20) + (64 << 10)
}
