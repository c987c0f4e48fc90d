/// The help texts; each command's text lists every flag it takes.
enum Help {
    static let overview = """
        sinkid: keep folders in sync across machines through a sinki server.

        usage:
          sinkid [run] --root PATH... [options]   run the agent (foreground)
          sinkid serve --listen ADDR --data DIR    run the sync server
          sinkid help COMMAND                      help for one command
          sinkid --version

        With no --server, the agent runs an embedded server on 127.0.0.1:7071 that other agents
        can use with --server http://HOST:7071.
        """

    static let run = """
        usage: sinkid [run] --root PATH... [options]

        Watches each root and keeps it in sync with the same-named root on other machines.

        options:
          --root PATH          a folder to sync (repeatable); its name is the folder's base name
          --server URL         the sync server (default: an embedded one on --listen)
          --listen ADDR        the embedded server's address (default 127.0.0.1:7071)
          --state DIR          state folder (default $XDG_STATE_HOME/sinki or ~/.local/state/sinki)
          --device NAME        this machine's name in records and conflict copies (default: hostname)
          --token-file FILE    a file holding the bearer token for the server
          --config FILE        the config file (default $XDG_CONFIG_HOME/sinki/sinki.conf)
          --log-level LEVEL    debug, info, warning or error (default info)
        """

    static let serve = """
        usage: sinkid serve --listen ADDR --data DIR [--tokens FILE] [--log-level LEVEL]

        Runs the sync server: records in SQLite under DIR.

        options:
          --listen ADDR        address and port, e.g. 0.0.0.0:7071 or [::1]:7071 (default 127.0.0.1:7071)
          --data DIR           where the server keeps its database (required)
          --tokens FILE        bearer tokens, one "TOKEN USER DEVICE" per line; without it, no auth
          --log-level LEVEL    debug, info, warning or error (default info)
        """

    static func command(_ name: String) -> String? {
        switch name {
        case "run": return run
        case "serve": return serve
        case "help": return "usage: sinkid help COMMAND"
        default: return nil
        }
    }
}
