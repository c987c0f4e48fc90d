extension ConfigFile {
    /// Every section the file may hold (`merge PATTERNS` for the pattern sections) with its keys, as
    /// the parser checks them; the man page and the docs are tested against this list.
    public static var knownKeys: [(section: String, keys: [String])] {
        SectionKind.allCases.map { ($0.rawValue, $0.keys) }
    }
}
