import SinkiSupport

/// `sinkid completion bash|zsh`: completion scripts written from the command table, so that every
/// command and flag completes and none that does not exist.
enum CompletionCommand {
    static func run(_ words: [String]) throws(UsageError) -> ExitCode {
        let arguments = try Arguments(words, CommandCatalog.completion)
        if arguments.has("help") {
            print(Help.completion)
            return .success
        }
        switch arguments.positional.first {
        case "bash"?: print(bash, terminator: "")
        case "zsh"?: print(zsh, terminator: "")
        case let other?:
            var message = "no completion for \(other): bash or zsh"
            if let guess = nearest(other, in: ["bash", "zsh"]) { message += "; did you mean \(guess)?" }
            throw UsageError(message)
        case nil: throw UsageError("completion needs a shell: bash or zsh")
        }
        return .success
    }

    /// What a flag's value is, for completing it.
    enum ValueKind { case directory, file, choice([String]), text }

    static func kind(of flag: String) -> ValueKind {
        switch flag {
        case "root", "state", "data": .directory
        case "config", "token-file", "tokens": .file
        case "log-level": .choice(["debug", "info", "warning", "error"])
        case "keep": .choice(["local", "remote", "both"])
        default: .text
        }
    }

    static var bash: String {
        let commands = CommandCatalog.all.map(\.name).joined(separator: " ")
        var cases = ""
        for spec in CommandCatalog.all {
            cases += "        \(spec.name)) flags=\"\(spec.flags.joined(separator: " "))\" ;;\n"
        }
        var values = ""
        for flag in Set(CommandCatalog.all.flatMap(\.valued)).sorted() {
            switch kind(of: flag) {
            case .directory: values += "        --\(flag)) COMPREPLY=($(compgen -d -- \"$cur\")); return ;;\n"
            case .file: values += "        --\(flag)) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
            case let .choice(words): values += "        --\(flag)) COMPREPLY=($(compgen -W \"\(words.joined(separator: " "))\" -- \"$cur\")); return ;;\n"
            case .text: values += "        --\(flag)) return ;;\n"
            }
        }
        return """
            # bash completion for sinkid; written by `sinkid completion bash`.
            _sinkid() {
                local cur prev command flags word
                cur="${COMP_WORDS[COMP_CWORD]}"
                prev="${COMP_WORDS[COMP_CWORD-1]}"
                command=run
                for word in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
                    case "$word" in -*) ;; *) command="$word"; break ;; esac
                done
                case "$prev" in
            \(values)    esac
                case "$command" in
            \(cases)    esac
                if [[ "$cur" == -* ]]; then
                    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
                elif [[ $COMP_CWORD -eq 1 ]]; then
                    COMPREPLY=($(compgen -W "\(commands) --version --help" -- "$cur"))
                elif [[ "$command" == help || "$command" == completion ]]; then
                    COMPREPLY=($(compgen -W "\(commands) bash zsh" -- "$cur"))
                fi
            }
            complete -F _sinkid sinkid

            """
    }

    static var zsh: String {
        var cases = ""
        for spec in CommandCatalog.all {
            var specs: [String] = []
            for flag in spec.valued {
                let action: String
                switch kind(of: flag) {
                case .directory: action = "_files -/"
                case .file: action = "_files"
                case let .choice(words): action = "(\(words.joined(separator: " ")))"
                case .text: action = " "
                }
                specs.append("'--\(flag)=[\(flag)]:\(flag):\(action)'")
            }
            for flag in spec.boolean { specs.append("'--\(flag)[\(flag)]'") }
            switch spec.operands {
            case .none: break
            case .path: specs.append("'1:path: '")
            case .command: specs.append("'1:command:(\(CommandCatalog.all.map(\.name).joined(separator: " ")))'")
            }
            cases += "        \(spec.name)) _arguments \(specs.joined(separator: " ")) ;;\n"
        }
        let described = CommandCatalog.all.map { "'\($0.name):\($0.summary.replacingOccurrences(of: "'", with: ""))'" }.joined(separator: " ")
        return """
            #compdef sinkid
            # zsh completion for sinkid; written by `sinkid completion zsh`.
            _sinkid() {
                local -a commands
                commands=(\(described))
                if (( CURRENT == 2 )) && [[ $words[2] != -* ]]; then
                    _describe command commands
                    return
                fi
                local command=run
                [[ $words[2] != -* ]] && command=$words[2] && shift words && (( CURRENT-- ))
                case $command in
            \(cases)    esac
            }
            _sinkid "$@"

            """
    }
}
