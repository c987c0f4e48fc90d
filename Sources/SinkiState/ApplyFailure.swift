import Glibc
import SinkiRecord
import SinkiSupport

/// Why a remote change could not be written here. A change that fails is never dropped: it is kept
/// in the state database (`unapplied`) with its failure until it is applied or superseded.
public struct ApplyFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The kind of cause, which decides when the change is tried again.
    public enum Cause: String, Sendable, CaseIterable {
        /// The local entry changed between the look and the write: looked at again at once.
        case changedHere = "changed-here"
        /// Another program has the file open for writing: tried again when it is closed.
        case busy
        /// A folder on the way was removed or renamed meanwhile: looked at again at once.
        case folderGone = "folder-gone"
        /// A rename's source went away: the record's own content is written instead.
        case sourceGone = "source-gone"
        /// The content is not here yet (not inline, or its download is missing).
        case contentMissing = "content-missing"
        /// Its download failed after its last attempt (the server's bytes do not match their hash, the
        /// asset is gone): tried again later, or now with `sinkid retry`.
        case downloadFailed = "download-failed"
        /// The disk or a quota is full (ENOSPC, EDQUOT).
        case noSpace = "no-space"
        /// The file system is mounted read-only (EROFS).
        case readOnly = "read-only"
        /// The file or folder may not be changed (EACCES, EPERM: permissions, an immutable file).
        case permission
        /// A name longer than the file system takes.
        case nameTooLong = "name-too-long"
        /// A symbolic link or a special file stands where the record's path leads.
        case blocked
        /// The record cannot be a path here at all (its path breaks the rules); kept to be seen.
        case invalid
        /// The path has a local change too: waits for its merge rule to settle it.
        case conflict
        /// Any other error from the disk.
        case io
    }

    public var cause: Cause
    public var message: String

    public init(_ cause: Cause, _ message: String) {
        self.cause = cause
        self.message = message
    }

    public var description: String { message }

    /// Causes that the same apply looks at again at once: the disk moved under it, and a fresh look
    /// decides what the change now is (a conflict, a write without a rename, a folder made again).
    public var decidesAgain: Bool {
        switch cause {
        case .changedHere, .folderGone, .sourceGone: return true
        default: return false
        }
    }

    /// Classifies an error from writing below a root.
    public static func from(_ error: any Error) -> ApplyFailure {
        if let failure = error as? ApplyFailure { return failure }
        if let error = error as? SafeRootError {
            switch error {
            case .symlinkInPath: return ApplyFailure(.blocked, error.description)
            case let .system(system): return from(system)
            }
        }
        if let error = error as? SystemError { return from(error) }
        if let error = error as? ContentMismatch { return ApplyFailure(.contentMissing, error.description) }
        return ApplyFailure(.io, "\(error)")
    }

    static func from(_ error: SystemError) -> ApplyFailure {
        let cause: Cause
        switch error.errno {
        case ENOSPC, EDQUOT: cause = .noSpace
        case EROFS: cause = .readOnly
        case EACCES, EPERM: cause = .permission
        case ENAMETOOLONG: cause = .nameTooLong
        case EAGAIN, EEXIST: cause = .changedHere
        case ENOTDIR: cause = .folderGone
        case ETXTBSY: return ApplyFailure(.busy, "\(error.path.map(quoted) ?? "the file") is open for writing in another program; applied once it is closed")
        case ELOOP: cause = .blocked
        default: cause = .io
        }
        return ApplyFailure(cause, error.description)
    }
}

/// How long a change that could not be applied waits before it is tried again on its own: growing
/// with each failed attempt, capped, and jittered so that many such changes do not all come back at
/// once. Events that may have removed the cause (a file closed, a folder made, space freed, `sinkid
/// retry`) try it sooner.
public enum RetryDelay {
    /// Nanoseconds to wait after the `attempts`-th failure.
    public static func after(attempts: Int, cause: ApplyFailure.Cause) -> Int64 {
        let (first, cap): (Double, Double)
        switch cause {
        case .invalid: return 24 * 3600 * 1_000_000_000 // it cannot apply; shown, and tried again by `sinkid retry` or a verify
        case .conflict: (first, cap) = (5, 60)
        case .busy: (first, cap) = (2, 30)
        case .changedHere, .folderGone, .sourceGone, .contentMissing: (first, cap) = (0.5, 30)
        case .noSpace, .readOnly, .permission, .nameTooLong, .blocked, .io: (first, cap) = (1, 60)
        case .downloadFailed: (first, cap) = (30, 600)
        }
        let grown = min(cap, first * pow(2, Double(max(0, attempts - 1))))
        return Int64(grown * Double.random(in: 0.8...1.2) * 1e9)
    }
}
