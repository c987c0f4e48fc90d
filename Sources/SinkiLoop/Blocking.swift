import Dispatch

/// Runs blocking work on Dispatch's thread pool and resumes the caller on its own executor.
public enum Blocking {
    /// Throws what `work` throws, and nothing when it throws nothing.
    public static func run<T: Sendable, E: Error>(_ work: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: Result(catching: work))
            }
        }
        return try result.get()
    }

    /// Applies `work` to each element on all cores; results keep the input order.
    public static func map<T: Sendable, R: Sendable>(_ items: [T], _ work: @Sendable (T) -> R) -> [R] {
        if items.count < 2 { return items.map(work) }
        let results = UnsafeMutableBufferPointer<R?>.allocate(capacity: items.count)
        results.initialize(repeating: nil)
        defer {
            // The slots own their values: release them, or every result leaks.
            results.deinitialize()
            results.deallocate()
        }
        let base = SendablePointer(results.baseAddress!)
        items.withUnsafeBufferPointer { input in
            let source = SendableBuffer(input)
            DispatchQueue.concurrentPerform(iterations: items.count) { index in
                // Each index writes its own slot: no two iterations share memory.
                base.pointer[index] = work(source.buffer[index])
            }
        }
        return results.map { $0! }
    }
}

// @unchecked: each concurrentPerform iteration touches only its own element of the buffer.
private struct SendablePointer<R>: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<R?>
    init(_ pointer: UnsafeMutablePointer<R?>) { self.pointer = pointer }
}

// @unchecked: the buffer is only read while the caller keeps the array alive and unchanged.
private struct SendableBuffer<T>: @unchecked Sendable {
    let buffer: UnsafeBufferPointer<T>
    init(_ buffer: UnsafeBufferPointer<T>) { self.buffer = buffer }
}
