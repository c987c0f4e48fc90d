import SinkiSupport

/// `sinkid completion bash|zsh|fish`: completion scripts written from the command table, so that every
/// command, `serve`'s subcommands and every flag complete, and nothing that does not exist.
enum CompletionCommand {
    static func run(_ words: [String]) throws(UsageError) -> ExitCode {
        guard let arguments = try Arguments.orHelp(words, CommandCatalog.completion) else { return .success }
        switch arguments.positional.first {
        case "bash"?: print(bash, terminator: "")
        case "zsh"?: print(zsh, terminator: "")
        case "fish"?: print(fish, terminator: "")
        case let other?:
            var message = "no completion for \(other): bash, zsh or fish"
            if let guess = nearest(other, in: shells) { message += "; did you mean \(guess)?" }
            throw UsageError(message)
        case nil: throw UsageError("completion needs a shell: bash, zsh or fish")
        }
        return .success
    }

    static let shells = ["bash", "zsh", "fish"]

    /// The commands with subcommands (`serve token add`), from the command table.
    static var withSubcommands: [CommandSpec] { CommandCatalog.all.filter { !$0.subcommands.isEmpty } }

    /// What a flag's value is, for completing it.
    enum ValueKind { case directory, file, choice([String]), text }

    static func kind(of flag: String) -> ValueKind {
        switch flag {
        case "root", "state", "data": .directory
        case "config", "token-file", "tokens", "ca-file", "output": .file
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
        let valuedFlags = Set(CommandCatalog.all.flatMap(\.valued)).sorted().map { "--" + $0 }.joined(separator: " ")
        // A command's nouns, then each noun's actions (serve, token, add), flags' values skipped.
        var nested = ""
        for spec in withSubcommands {
            nested += "            elif [[ \"$command\" == \(spec.name) && ${#words[@]} -le 2 ]]; then\n                case \"${words[1]}\" in\n"
            nested += "                \"\") COMPREPLY=($(compgen -W \"\(spec.subcommands.map(\.noun).joined(separator: " "))\" -- \"$cur\")); return ;;\n"
            for sub in spec.subcommands {
                nested += "                \(sub.noun)) COMPREPLY=($(compgen -W \"\(sub.actions.joined(separator: " "))\" -- \"$cur\")); return ;;\n"
            }
            nested += "                esac\n"
        }
        return """
            # bash completion for sinkid; written by `sinkid completion bash`.
            _sinkid() {
                local cur prev command flags word skip words
                cur="${COMP_WORDS[COMP_CWORD]}"
                prev="${COMP_WORDS[COMP_CWORD-1]}"
                command=run
                words=()
                skip=0
                # The words typed so far that are no flags nor flags' values: the command, then serve's noun.
                for word in "${COMP_WORDS[@]:1:COMP_CWORD-1}"; do
                    if (( skip )); then skip=0; continue; fi
                    case " \(valuedFlags) " in *" $word "*) skip=1; continue ;; esac
                    case "$word" in -*) ;; *) words+=("$word") ;; esac
                done
                [[ ${#words[@]} -gt 0 ]] && command="${words[0]}"
                case "$prev" in
            \(values)    esac
                case "$command" in
            \(cases)    esac
                if [[ "$cur" == -* ]]; then
                    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
            \(nested)    elif [[ ${#words[@]} -eq 0 ]]; then
                    COMPREPLY=($(compgen -W "\(commands) --version --help" -- "$cur"))
                elif [[ "$command" == help || "$command" == completion ]]; then
                    COMPREPLY=($(compgen -W "\(commands) \(shells.joined(separator: " "))" -- "$cur"))
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
            if !spec.subcommands.isEmpty {
                let actions = spec.subcommands.map { "\($0.noun)) _values action \($0.actions.joined(separator: " ")) ;;" }.joined(separator: " ")
                specs.append("'1:subcommand:(\(spec.subcommands.map(\.noun).joined(separator: " ")))'")
                specs.append("'2:action:->\(spec.name)_action'")
                cases += "        \(spec.name)) _arguments \(specs.joined(separator: " "))\n"
                cases += "            [[ $state == \(spec.name)_action ]] && case $words[2] in \(actions) esac ;;\n"
                continue
            }
            switch spec.operands {
            case .none: break
            case .root: specs.append("'1:root: '")
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

    static var fish: String {
        var lines = ["# fish completion for sinkid; written by `sinkid completion fish`.", "complete -c sinkid -f"]
        let names = CommandCatalog.all.map(\.name)
        for spec in CommandCatalog.all {
            lines.append("complete -c sinkid -n __fish_use_subcommand -a \(spec.name) -d \(fishQuoted(spec.summary))")
        }
        for spec in CommandCatalog.all {
            // `run` is the default command: its flags complete with no command typed too.
            let condition = spec.name == "run" ? "'__fish_use_subcommand; or __fish_seen_subcommand_from run'"
                                               : "'__fish_seen_subcommand_from \(spec.name)'"
            for flag in spec.valued {
                let values: String
                switch kind(of: flag) {
                case .directory: values = " -a '(__fish_complete_directories)'"
                case .file: values = " -F"
                case let .choice(words): values = " -a '\(words.joined(separator: " "))'"
                case .text: values = ""
                }
                lines.append("complete -c sinkid -n \(condition) -l \(flag) -r\(values)")
            }
            for flag in spec.boolean { lines.append("complete -c sinkid -n \(condition) -l \(flag)") }
            switch spec.operands {
            case .none, .root: break
            case .path: lines.append("complete -c sinkid -n \(condition) -F")
            case .command: lines.append("complete -c sinkid -n \(condition) -a '\(names.joined(separator: " "))'")
            }
        }
        for spec in withSubcommands {
            let nouns = spec.subcommands.map(\.noun).joined(separator: " ")
            lines.append("complete -c sinkid -n '__fish_seen_subcommand_from \(spec.name); and not __fish_seen_subcommand_from \(nouns)' -a '\(nouns)'")
            for sub in spec.subcommands {
                let others = sub.actions.joined(separator: " ")
                lines.append("complete -c sinkid -n '__fish_seen_subcommand_from \(spec.name); and __fish_seen_subcommand_from \(sub.noun); and not __fish_seen_subcommand_from \(others)' -a '\(others)'")
            }
        }
        lines.append("complete -c sinkid -n '__fish_seen_subcommand_from completion' -a '\(shells.joined(separator: " "))'")
        return lines.joined(separator: "\n") + "\n"
    }

    /// A fish string literal (single quotes; backslashes and quotes escaped).
    static func fishQuoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }
}
