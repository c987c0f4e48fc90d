// Measures the content-defined chunker (docs/chunking.md): `bench-chunker` prints cut-only and
// cut+SHA-256 throughput on 1 GiB, in memory and from a file in /tmp; `bench-chunker --measure`
// prints the size distribution and the bytes an edit resends, for the profiles and some rivals.
import Glibc
import SinkiSupport

/// SplitMix64 bytes, little-endian, 8 per step: the same stream as the spec's test vectors.
func pseudoRandom(count: Int, seed: UInt64) -> [UInt8] {
    var state = seed
    var out = [UInt8](repeating: 0, count: count)
    out.withUnsafeMutableBytes { buffer in
        var index = 0
        while index < count {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            for byte in 0..<min(8, count - index) { buffer[index + byte] = UInt8(truncatingIfNeeded: z >> (8 * UInt64(byte))) }
            index += 8
        }
    }
    return out
}

func cpuSeconds() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

/// Runs `body` `runs` times and reports the run that used the least CPU time, with its wall time: the
/// best, because this machine is shared and a slow run measures the neighbours.
func timed(_ label: String, bytes: Int, runs: Int, _ body: () throws -> Int) rethrows {
    var best = Double.infinity
    var bestCPU = 0.0
    var result = 0
    for _ in 0..<runs {
        let wall = Clock.monotonic()
        let cpu = cpuSeconds()
        result = try body()
        let seconds = Double(Clock.monotonic() - wall) / 1e9
        // The best by CPU time: the wall clock also counts waiting for a core on this shared machine.
        let used = cpuSeconds() - cpu
        if used < bestCPU || best == .infinity {
            best = seconds
            bestCPU = used
        }
    }
    let rate = Double(bytes) / best / 1e9
    // Per CPU second too: on a shared machine the wall clock also counts time spent waiting for a core.
    let perCPU = Double(bytes) / bestCPU / 1e9
    print("\(label): \(format(rate)) GB/s (\(format(best)) s wall, \(format(bestCPU)) CPU s = \(format(perCPU)) GB per CPU s, \(result) chunks; best of \(runs))")
}

func format(_ value: Double) -> String {
    let scaled = (value * 100).rounded() / 100
    return "\(scaled)"
}

func cutOnly(_ data: [UInt8], profile: ChunkProfile, piece: Int) -> Int {
    var cutter = ChunkCutter(profile: profile)
    var count = 0
    data.withUnsafeBytes { all in
        var start = 0
        while start < all.count {
            var rest = UnsafeRawBufferPointer(rebasing: all[start..<min(start + piece, all.count)])
            while let length = cutter.cut(in: rest) {
                count += 1
                rest = UnsafeRawBufferPointer(rebasing: rest[length...])
            }
            start += piece
        }
    }
    if cutter.finish() != nil { count += 1 }
    return count
}

func throughput(size: Int, runs: Int) throws {
    print("generating \(size >> 20) MiB of SplitMix64 bytes (seed 1) in memory")
    let data = pseudoRandom(count: size, seed: 1)
    for profile in [ChunkProfile.large, .small] {
        print("profile \(profile)")
        timed("  cut only, in memory, 256 KiB pieces", bytes: size, runs: runs) { cutOnly(data, profile: profile, piece: 256 << 10) }
        timed("  cut + SHA-256, in memory", bytes: size, runs: runs) { Chunker.chunks(of: data, profile: profile).count }
    }
    timed("SHA-256 alone, in memory, for comparison", bytes: size, runs: runs) {
        data.withUnsafeBytes { all in
            let digest = Digest(.sha256)
            var start = 0
            while start < all.count {
                digest.update(UnsafeRawBufferPointer(rebasing: all[start..<min(start + (256 << 10), all.count)]))
                start += 256 << 10
            }
            _ = digest.finish()
        }
        return 0
    }
    let path = "/tmp/bench-chunker-\(getpid()).bin"
    let file = try FileDescriptor.open(path, flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
    defer { unlink(path) }
    try file.write(data)
    print("wrote \(path) (read back from the page cache)")
    try timed("  cut + SHA-256, file in /tmp, profile large", bytes: size, runs: runs) { try Chunker.chunks(ofPath: path, profile: .large).count }
}

func percentile(_ sorted: [Int], _ fraction: Double) -> Int { sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))] }

/// Bytes of `edited`'s chunks that `original` lacks: what a sender would upload after the edit.
func resent(_ original: [Chunk], _ edited: [Chunk]) -> (bytes: Int, chunks: Int) {
    let known = Set(original.map(\.sha256))
    let fresh = edited.filter { !known.contains($0.sha256) }
    return (fresh.reduce(0) { $0 + $1.length }, fresh.count)
}

func measure(size: Int) {
    let kib = 1 << 10
    func profile(_ minimum: Int, _ small: Int, _ large: Int) -> ChunkProfile {
        ChunkProfile(minimum: minimum * kib, normal: 1 << 20, maximum: 4 << 20, smallMaskBits: small, largeMaskBits: large)
    }
    let rivals: [(String, ChunkProfile)] = [
        ("large (chosen)", .large),
        ("level 0 (20/20)", profile(256, 20, 20)),
        ("level 2 (22/18)", profile(256, 22, 18)),
        ("level 3 (23/17)", profile(256, 23, 17)),
        ("level 1, min 512 KiB", profile(512, 21, 19)),
        ("level 0, min 128 KiB", profile(128, 20, 20)),
        ("level 1, min 128 KiB", profile(128, 21, 19)),
        ("level 2, min 128 KiB", profile(128, 22, 18)),
        ("level 0, min 64 KiB", profile(64, 20, 20)),
        ("medium, 128 KiB / 512 KiB / 2 MiB (20/18)",
         ChunkProfile(minimum: 128 * kib, normal: 512 * kib, maximum: 2 << 20, smallMaskBits: 20, largeMaskBits: 18)),
        ("medium, 64 KiB / 512 KiB / 2 MiB (20/18)",
         ChunkProfile(minimum: 64 * kib, normal: 512 * kib, maximum: 2 << 20, smallMaskBits: 20, largeMaskBits: 18)),
        ("medium, 128 KiB / 384 KiB / 2 MiB (20/18)",
         ChunkProfile(minimum: 128 * kib, normal: 384 * kib, maximum: 2 << 20, smallMaskBits: 20, largeMaskBits: 18)),
        ("medium, 128 KiB / 384 KiB / 2 MiB (19/17)",
         ChunkProfile(minimum: 128 * kib, normal: 384 * kib, maximum: 2 << 20, smallMaskBits: 19, largeMaskBits: 17)),
        ("medium, 96 KiB / 384 KiB / 2 MiB (20/18)",
         ChunkProfile(minimum: 96 * kib, normal: 384 * kib, maximum: 2 << 20, smallMaskBits: 20, largeMaskBits: 18)),
        ("small (chosen)", .small),
        ("small, level 2 (20/16)", ChunkProfile(minimum: 64 * kib, normal: 256 * kib, maximum: 1 << 20, smallMaskBits: 20, largeMaskBits: 16)),
    ]
    // `--measure MiB small` measures the small profiles alone, on a file the size they are for.
    let only = CommandLine.arguments.count > 3 ? CommandLine.arguments[3] : nil
    let chosen = rivals.filter { only == nil || $0.0.hasPrefix(only!) }
    let data = pseudoRandom(count: size, seed: 1)
    let patch = pseudoRandom(count: 1 << 20, seed: 2)
    // One edit is a sample of one: sixteen places, spread evenly, each edited alone.
    let span = size - (2 << 20)
    let places = (0..<16).map { span / 32 + $0 * (span / 16) + 12345 }
    print("\(size >> 20) MiB of SplitMix64 bytes (seed 1); edits: 1 MiB (seed 2) overwritten or inserted, one at a time, at \(places)")
    func mib(_ bytes: Int) -> String { format(Double(bytes) / Double(1 << 20)) }
    for (name, profile) in chosen {
        let original = Chunker.chunks(of: data, profile: profile)
        let sizes = original.dropLast().map(\.length).sorted()
        let mean = Double(sizes.reduce(0, +)) / Double(sizes.count)
        let atMax = sizes.filter { $0 == profile.maximum }.count
        var overwrites: [(bytes: Int, chunks: Int)] = []
        var inserts: [(bytes: Int, chunks: Int)] = []
        for place in places {
            var overwritten = data
            overwritten.replaceSubrange(place..<place + patch.count, with: patch)
            overwrites.append(resent(original, Chunker.chunks(of: overwritten, profile: profile)))
            var inserted = data
            inserted.insert(contentsOf: patch, at: place)
            inserts.append(resent(original, Chunker.chunks(of: inserted, profile: profile)))
        }
        func summary(_ runs: [(bytes: Int, chunks: Int)]) -> String {
            "mean \(mib(runs.reduce(0) { $0 + $1.bytes } / runs.count)) MiB, max \(mib(runs.map(\.bytes).max()!)) MiB (\(runs.map(\.chunks).max()!) chunks)"
        }
        print("\(name): \(profile)")
        print("  \(original.count) chunks, mean \(mib(Int(mean))) MiB; min \(mib(sizes[0])), p10 \(mib(percentile(sizes, 0.1))), p50 \(mib(percentile(sizes, 0.5))), p90 \(mib(percentile(sizes, 0.9))), max \(mib(sizes.last!)) MiB; \(atMax) cut at max")
        print("  resent after overwriting 1 MiB: \(summary(overwrites)); after inserting 1 MiB: \(summary(inserts))")
    }
}

/// The spec's test vectors (docs/chunking.md), printed for copying into it and into ChunkerTests.
func vectors() {
    let table = GearTable.entries
    func hex64(_ value: UInt64) -> String { "0x" + Hex.encode((0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64($0))) }) }
    print("gear[0...3] \(table[0..<4].map(hex64)); gear[255] \(hex64(table[255]))")
    print("SplitMix64 seed 0, first 8 bytes: \(Hex.encode(pseudoRandom(count: 8, seed: 0)))")
    for (name, profile, size) in [("large", ChunkProfile.large, 16 << 20), ("small", ChunkProfile.small, 4 << 20)] {
        let chunks = Chunker.chunks(of: pseudoRandom(count: size, seed: 0), profile: profile)
        print("\(name), \(size >> 20) MiB, seed 0: ends \(chunks.map { $0.offset + Int64($0.length) })")
        for chunk in chunks.prefix(3) { print("  \(chunk)") }
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
do {
    if arguments.first == "--vectors" {
        vectors()
    } else if arguments.first == "--measure" {
        measure(size: (arguments.dropFirst().first.flatMap { Int($0) } ?? 128) << 20)
    } else {
        try throughput(size: (arguments.first.flatMap { Int($0) } ?? 1024) << 20, runs: 3)
    }
} catch {
    print("bench-chunker: \(error)")
    exit(1)
}
