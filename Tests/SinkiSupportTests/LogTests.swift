import Foundation
import Glibc
import SinkiTestSupport
import Testing
@testable import SinkiSupport

/// Under systemd the agent's stderr is the journal's stream: each line then starts with its syslog
/// priority, so `journalctl -p warning` shows warnings and errors only (issue 25, item 8).
@Suite(.serialized) struct LogTests {
    /// Lines written by a logger on `fd`, read back from `path`.
    private func lines(_ path: String) -> [String] {
        (readFile(path) ?? "").split(separator: "\n").map(String.init)
    }

    @Test func linesToTheJournalStartWithTheirPriority() throws {
        let directory = TemporaryDirectory("sinki-log")
        let journalPath = directory.child("journal"), otherPath = directory.child("other")
        let journal = open(journalPath, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600), other = open(otherPath, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        #expect(journal >= 0 && other >= 0)
        defer { close(journal); close(other) }
        var info = stat()
        #expect(fstat(journal, &info) == 0)
        setenv("JOURNAL_STREAM", "\(info.st_dev):\(info.st_ino)", 1)
        defer { unsetenv("JOURNAL_STREAM") }

        let toJournal = Logger(label: "sinkid", level: .debug, fd: journal)
        let child = toJournal.child("replica")
        toJournal.debug("a debug line")
        toJournal.info("an info line")
        child.warning("a warning line")
        child.error("an error line")
        let written = lines(journalPath)
        #expect(written.count == 4)
        #expect(zip(written, ["<7>", "<6>", "<4>", "<3>"]).allSatisfy { $0.hasPrefix($1) }, "\(written)")
        #expect(written[2].contains("WARNING replica: a warning line"))

        // Another stream (the unit's command redirected stderr to a file): no prefix.
        let elsewhere = Logger(label: "sinkid", fd: other)
        elsewhere.warning("not for the journal")
        #expect(lines(otherPath).first?.hasPrefix("<") == false)
        // A JOURNAL_STREAM that names nothing sensible is not the journal.
        setenv("JOURNAL_STREAM", "not:numbers", 1)
        #expect(!Logger.isJournal(journal))
    }

    /// Nothing in a message can make a line of its own or drive a terminal (issue 24, item 11): a peer's
    /// device name with a newline and an escape sequence is written on its one line, escaped.
    @Test func aMessageIsAlwaysOneLine() throws {
        let directory = TemporaryDirectory("sinki-log")
        let path = directory.child("log")
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        #expect(fd >= 0)
        defer { close(fd) }
        let logger = Logger(label: "sinkid", fd: fd)
        logger.warning("conflict with laptop\n2026-01-01T00:00:00Z ERROR sinkid: forged\u{1B}[31m\tend\u{2028}")
        logger.info("café … plain")
        let written = lines(path)
        #expect(written.count == 2, "\(written)")
        #expect(written.first?.hasSuffix(#"conflict with laptop\n2026-01-01T00:00:00Z ERROR sinkid: forged\u{1B}[31m\tend\u{2028}"#) == true, "\(written)")
        #expect(written.last?.hasSuffix("café … plain") == true)
    }

    /// The same problem logged again is one problem with a count (status says it once); another
    /// problem starts a new count.
    @Test func aRepeatedProblemIsCountedNotRepeated() throws {
        let directory = TemporaryDirectory("sinki-log")
        let fd = open(directory.child("log"), O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        defer { close(fd) }
        let logger = Logger(label: "sinkid", fd: fd)
        for _ in 0..<3 { logger.child("replica").warning("cannot write \"SaveGames/a\": no space left on device") }
        #expect(logger.lastProblem?.count == 3 && logger.lastProblem?.message == "replica: cannot write \"SaveGames/a\": no space left on device")
        logger.error("something else")
        #expect(logger.lastProblem?.count == 1 && logger.lastProblem?.level == .error)
    }
}
