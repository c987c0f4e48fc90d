/// A parsed command line: positional words and `--flag value` options (repeatable ones keep all).
struct Arguments: Sendable {
    var positional: [String] = []
    var options: [String: [String]] = [:]
    var switches: Set<String> = []

    /// Parses `words` against the flags a command takes: `valued` take a value (`--x v` or
    /// `--x=v`), `boolean` do not. An unknown flag is an error naming it and the nearest known one.
    init(_ words: [String], valued: [String], boolean: [String]) throws(UsageError) {
        var index = 0
        while index < words.count {
            let word = words[index]
            index += 1
            guard word.hasPrefix("--"), word.count > 2 else {
                if word == "-h" { switches.insert("help"); continue }
                if word.hasPrefix("-") && word != "-" { throw UsageError("unknown option \(word)") }
                positional.append(word)
                continue
            }
            var name = String(word.dropFirst(2))
            var value: String?
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if boolean.contains(name) {
                if value != nil { throw UsageError("option --\(name) takes no value") }
                switches.insert(name)
            } else if valued.contains(name) {
                if value == nil {
                    guard index < words.count else { throw UsageError("option --\(name) needs a value") }
                    value = words[index]
                    index += 1
                }
                options[name, default: []].append(value!)
            } else {
                var message = "unknown option --\(name)"
                if let guess = nearest(name, in: valued + boolean) { message += "; did you mean --\(guess)?" }
                throw UsageError(message)
            }
        }
    }

    func value(_ name: String) -> String? { options[name]?.last }
    func values(_ name: String) -> [String] { options[name] ?? [] }
    func has(_ name: String) -> Bool { switches.contains(name) }
}
