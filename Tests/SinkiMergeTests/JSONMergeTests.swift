import Testing
import SinkiRecord
@testable import SinkiMerge

/// The `json` rule: a three-way merge by key, recursive, arrays as sequences.
struct JSONMergeTests {
    func merge(_ base: String, _ local: String, _ remote: String) throws -> String {
        let merged = text(try JSONMerge.merge(base: bytes(base), local: bytes(local), remote: bytes(remote)))
        let swapped = text(try JSONMerge.merge(base: bytes(base), local: bytes(remote), remote: bytes(local)))
        #expect(merged == swapped, "not symmetric")
        return merged
    }

    func conflict(_ base: String, _ local: String, _ remote: String) -> String? {
        do {
            _ = try JSONMerge.merge(base: bytes(base), local: bytes(local), remote: bytes(remote))
            return nil
        } catch {
            if case let .conflict(path) = error { return path }
            return "\(error)"
        }
    }

    @Test func keysAddedOnBothSidesAreAllKept() throws {
        #expect(try merge(#"{"a":1}"#, #"{"a":1,"b":2}"#, #"{"a":1,"c":3}"#) == #"{"a":1,"b":2,"c":3}"#)
        // The same key added with the same value on both sides is one key.
        #expect(try merge(#"{"a":1}"#, #"{"a":1,"b":2}"#, #"{"a":1,"b":2,"c":3}"#) == #"{"a":1,"b":2,"c":3}"#)
    }

    @Test func aKeyDeletedOnOneSideStaysDeleted() throws {
        #expect(try merge(#"{"a":1,"b":2,"c":3}"#, #"{"a":1,"c":3}"#, #"{"a":1,"b":2,"c":30}"#) == #"{"a":1,"c":30}"#)
    }

    @Test func changesToDifferentKeysBothApply() throws {
        #expect(try merge(#"{"x":1,"y":1}"#, #"{"x":2,"y":1}"#, #"{"x":1,"y":3}"#) == #"{"x":2,"y":3}"#)
    }

    @Test func nestedObjectsMergeRecursively() throws {
        let base = #"{"player":{"name":"ann","stats":{"hp":10,"mp":5}},"level":1}"#
        let local = #"{"player":{"name":"ann","stats":{"hp":7,"mp":5}},"level":1}"#
        let remote = #"{"player":{"name":"ann","stats":{"hp":10,"mp":5,"xp":99},"title":"hero"},"level":2}"#
        #expect(try merge(base, local, remote) == #"{"player":{"name":"ann","stats":{"hp":7,"mp":5,"xp":99},"title":"hero"},"level":2}"#)
    }

    @Test func aKeyChangedDifferentlyOnBothSidesIsAConflict() {
        #expect(conflict(#"{"a":{"b":1}}"#, #"{"a":{"b":2}}"#, #"{"a":{"b":3}}"#) == "/a/b")
        // Deleted on one side, changed on the other.
        #expect(conflict(#"{"a":1,"k":1}"#, #"{"a":1}"#, #"{"a":1,"k":2}"#) == "/k")
        // Added on both sides with different values.
        #expect(conflict(#"{}"#, #"{"n":"x"}"#, #"{"n":"y"}"#) == "/n")
        // A key with a slash is named as a JSON pointer does.
        #expect(conflict(#"{"a/b":1}"#, #"{"a/b":2}"#, #"{"a/b":3}"#) == "/a~1b")
    }

    @Test func arraysAppendedOnBothSidesKeepEveryElement() throws {
        #expect(try merge(#"{"t":["gold"]}"#, #"{"t":["gold","silver"]}"#, #"{"t":["gold","bronze"]}"#) == #"{"t":["gold","bronze","silver"]}"#)
        #expect(try merge(#"[1,2]"#, #"[1,2,3]"#, #"[1,2,3,4]"#) == #"[1,2,3,4]"#)
    }

    @Test func arrayEditsInDifferentPlacesBothApply() throws {
        // One side deletes an element, the other appends.
        #expect(try merge(#"[1,2,3]"#, #"[1,3]"#, #"[1,2,3,4]"#) == #"[1,3,4]"#)
        // Both sides change a different element of an array of objects.
        let base = #"[{"id":1,"v":1},{"id":2,"v":1}]"#
        #expect(try merge(base, #"[{"id":1,"v":5},{"id":2,"v":1}]"#, #"[{"id":1,"v":1},{"id":2,"v":7}]"#) == #"[{"id":1,"v":5},{"id":2,"v":7}]"#)
        // Both change the same element, different keys of it: merged inside.
        #expect(try merge(#"[{"a":1,"b":1}]"#, #"[{"a":2,"b":1}]"#, #"[{"a":1,"b":2}]"#) == #"[{"a":2,"b":2}]"#)
    }

    @Test func overlappingArrayEditsAreAConflict() {
        #expect(conflict(#"[1,2,3]"#, #"[1,9,3]"#, #"[1,8,3]"#) == "/1")
        #expect(conflict(#"{"l":[1,2,3]}"#, #"{"l":[1,3]}"#, #"{"l":[1,2,2,3]}"#) != nil)
    }

    @Test func unreadableJSONIsRefused() {
        #expect(conflict(#"{"a":1}"#, #"{"a":"#, #"{"a":2}"#)?.contains("local version") == true)
        #expect(conflict(#"{"a":1}"#, #"{"a":1,"a":2}"#, #"{"a":3}"#)?.contains("appears twice") == true)
    }

    @Test func numbersKeepTheirTextExactly() throws {
        let base = #"{"big":12345678901234567890,"price":1.50,"e":1E5,"n":1}"#
        let merged = try merge(base, #"{"big":12345678901234567890,"price":1.50,"e":1E5,"n":2}"#,
                               #"{"big":12345678901234567890,"price":1.50,"e":1E5,"n":1,"m":-0.0}"#)
        #expect(merged == #"{"big":12345678901234567890,"price":1.50,"e":1E5,"n":2,"m":-0.0}"#)
    }

    @Test func stringsWithEscapesRoundTrip() throws {
        let merged = try merge(#"{"s":"a\"b\\c\u00e9\n"}"#, #"{"s":"a\"b\\c\u00e9\n","x":1}"#, #"{"s":"a\"b\\cé\n"}"#)
        let value = try JSONValue.parse(bytes(merged))
        #expect(value["s"] == .string("a\"b\\cé\n"))
        #expect(value["x"] == .int(1))
    }

    @Test func keyOrderFollowsBothSides() throws {
        // Local moved a key to the front; remote added one at the end.
        #expect(try merge(#"{"a":1,"b":2}"#, #"{"b":2,"a":1}"#, #"{"a":1,"b":2,"c":3}"#) == #"{"b":2,"a":1,"c":3}"#)
    }

    @Test func indentedDocumentsStayIndented() throws {
        let base = "{\n    \"a\": 1,\n    \"list\": [\n        1\n    ]\n}\n"
        let local = "{\n    \"a\": 2,\n    \"list\": [\n        1\n    ]\n}\n"
        let remote = "{\n    \"a\": 1,\n    \"list\": [\n        1,\n        2\n    ],\n    \"empty\": {}\n}\n"
        #expect(try merge(base, local, remote) == "{\n    \"a\": 2,\n    \"list\": [\n        1,\n        2\n    ],\n    \"empty\": {}\n}\n")
        // One side compact, the other indented with tabs: the indented look wins, on both sides alike.
        #expect(try merge(#"{"a":1}"#, #"{"a":1,"b":2}"#, "{\n\t\"a\": 1,\n\t\"c\": 3\n}") == "{\n\t\"a\": 1,\n\t\"b\": 2,\n\t\"c\": 3\n}")
    }

    @Test func symmetricOnRandomEdits() throws {
        var random = SeededRandom(seed: 99)
        func randomValue(_ depth: Int) -> String {
            switch Int.random(in: 0..<(depth > 2 ? 3 : 5), using: &random) {
            case 0: return String(Int.random(in: 0..<4, using: &random))
            case 1: return "\"s\(Int.random(in: 0..<3, using: &random))\""
            case 2: return "null"
            case 3: return "[" + (0..<Int.random(in: 0...3, using: &random)).map { _ in randomValue(depth + 1) }.joined(separator: ",") + "]"
            default:
                let keys = ["a", "b", "c", "d"].shuffled(using: &random).prefix(Int.random(in: 0...3, using: &random))
                return "{" + keys.map { "\"\($0)\":" + randomValue(depth + 1) }.joined(separator: ",") + "}"
            }
        }
        var merged = 0
        for _ in 0..<3000 {
            let base = "{" + ["a", "b", "c"].map { "\"\($0)\":" + randomValue(1) }.joined(separator: ",") + "}"
            func edit() -> String {
                Int.random(in: 0..<3, using: &random) == 0 ? base
                    : "{" + ["a", "b", "c", "e"].filter { _ in Bool.random(using: &random) }.map { "\"\($0)\":" + randomValue(1) }.joined(separator: ",") + "}"
            }
            let local = edit(), remote = edit()
            let forward = try? JSONMerge.merge(base: bytes(base), local: bytes(local), remote: bytes(remote))
            let backward = try? JSONMerge.merge(base: bytes(base), local: bytes(remote), remote: bytes(local))
            #expect(forward == backward, "base \(base) local \(local) remote \(remote)")
            if let forward {
                merged += 1
                #expect((try? JSONValue.parse(forward)) != nil)
            }
        }
        #expect(merged > 500)
    }
}
