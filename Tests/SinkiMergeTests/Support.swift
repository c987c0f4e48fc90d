import Foundation
import SinkiConfig
@testable import SinkiMerge
import SinkiRecord
import SinkiSupport
import SinkiTestSupport

/// A logger whose lines land in a file the test can read. Keep it alive as long as the logger is
/// used: the descriptor closes with it.
final class LogCapture: Sendable {
    let directory = TemporaryDirectory("sinki-merge-log")
    let logger: Logger
    private let fd: Int32

    init() {
        fd = open(directory.child("log"), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        logger = Logger(label: "test", level: .debug, fd: fd)
    }

    deinit { close(fd) }

    var text: String { readFile(directory.child("log")) ?? "" }
}

func path(_ text: String) -> RecordPath { try! RecordPath(validating: text) }

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

/// Whether process `pid` is gone (or a zombie nobody reaped: dead all the same).
func processIsGone(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
    guard let close = stat.lastIndex(of: ")") else { return true }
    let state = stat[stat.index(close, offsetBy: 2)]
    return state == "Z" || state == "X"
}

/// A small deterministic generator (SplitMix64), so that property tests repeat exactly.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E3779B97F4A7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58476D1CE4E5B9
        z = (z ^ (z >> 27)) &* 0x94D049BB133111EB
        return z ^ (z >> 31)
    }
}

extension TemporaryDirectory {
    /// A path inside the directory without the doubled `/` the system temporary folder leaves, as
    /// `pwd` in a child would print it.
    func clean(_ name: String) -> String { child(name).replacingOccurrences(of: "//", with: "/") }
}
