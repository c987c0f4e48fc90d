/// The help texts; each command's text lists every flag it takes (a test holds them to the
/// command table and to the man page). The exit statuses follow from the table (`fullHelp`).
enum Help {
    static var overview: String {
        let width = CommandCatalog.all.map(\.name.count).max() ?? 0
        let lines = CommandCatalog.all.map { "  " + $0.name + String(repeating: " ", count: width - $0.name.count + 3) + $0.summary }
        return """
            sinkid: keep folders in sync across machines through a sinki server.

            usage:
              sinkid [run] --root PATH... [options]   run the agent (foreground)
              sinkid                                   the same, when sinki.conf names roots
              sinkid serve --listen ADDR --data DIR    run the sync server
              sinkid upload FILE --to URL              upload one file to a tus server
              sinkid COMMAND [options]                 talk to the running agent
              sinkid help COMMAND                      help for one command
              sinkid --version

            commands:
            \(lines.joined(separator: "\n"))

            With no --server, the agent runs an embedded server on 127.0.0.1:7071 that other agents
            can use with --server http://HOST:7071. Commands that talk to an agent find it through
            --state DIR (default $XDG_STATE_HOME/sinki or ~/.local/state/sinki). See sinkid(1).
            """
    }

    static let stateOption = "  --state DIR          the agent's state folder (default $XDG_STATE_HOME/sinki or ~/.local/state/sinki)"
    static let jsonOption = "  --json               print the agent's answer as JSON (errors too)"
    static let helpOption = "  --help, -h           this text"

    static let run = """
        usage: sinkid [run] --root PATH... [options]

        Watches each root and keeps it in sync with the same-named root on other machines.
        SIGTERM or SIGINT: finish the current write, save state, exit 0. SIGHUP: read the config again.

        options:
          --root PATH          a folder to sync (repeatable); its name is the folder's base name
          --server URL         the sync server (default: an embedded one on --listen)
          --listen ADDR        the embedded server's address (default 127.0.0.1:7071)
          --state DIR          state folder (default $XDG_STATE_HOME/sinki or ~/.local/state/sinki)
          --device NAME        this machine's name in records and conflict copies (default: the host name
                               and a suffix kept per state folder)
          --token-file FILE    a file holding the bearer token for the server
          --config FILE        the config file (default $XDG_CONFIG_HOME/sinki/sinki.conf)
          --log-level LEVEL    debug, info, warning or error (default info)
        \(helpOption)
        """

    static let serve = """
        usage: sinkid serve --listen ADDR --data DIR [--database URL] [--tokens FILE] [--max-upload-size SIZE] [--upload-expiry TIME]
                            [--chunk-grace TIME] [--tombstone-days N] [--history-days N] [--quota SIZE] [--rate-limit N]
                            [--public-url URL] [--behind-proxy] [--insecure-no-auth] [--log-level LEVEL]
               sinkid serve token add USER --device NAME --data DIR [--read-only] [--prefix PATH/]
                                  [--max-upload SIZE] [--max-uploads N] [--expires TIME] [--output FILE] [--json]
               sinkid serve token list [USER] --data DIR [--json]
               sinkid serve token revoke ID --data DIR
               sinkid serve user list --data DIR [--json]
               sinkid serve user quota USER SIZE|none --data DIR
               sinkid serve user remove USER --yes --data DIR

        Runs the sync server: records, users and device tokens in SQLite under DIR (or in the
        PostgreSQL database of --database), tus uploads (/v1/uploads/) in DIR/uploads, the chunks of
        large files in DIR/chunks. Every request
        needs a device token (docs/tokens.md); started with no users, the server makes a first one and
        writes its token to DIR/first-token.

        serve token and serve user work on DIR beside a running server or without one. token add makes
        the user if new and prints the new token as its last line, once: the server keeps only its
        hash. A token may be narrowed (read-only, a path prefix, upload size and count, a lifetime).
        token revoke ends a token and every token minted from it at once, also for a running server.
        user list shows each user's storage: what their current files take and what the versions kept
        for history take besides (a chunk counts once, however many versions share it), and their quota.
        user quota sets how much a user may store, history included (none: the server's --quota); a
        save that would pass it is refused (507) and the agent keeps it until there is room.
        user remove deletes the user's records, tokens, uploads and chunks for good.

        Every version of every path, deletes included, is kept for --history-days (sinkid history,
        cat and restore read them), and the chunks and data only old versions hold stay as long.

        options:
          --listen ADDR        address and port, e.g. 0.0.0.0:7071 or [::1]:7071 (default 127.0.0.1:7071)
          --data DIR           where the server keeps its database and uploads (required)
          --database URL       records, users and tokens in PostgreSQL (postgresql://USER@HOST:PORT/DB) instead;
                               also for serve token and serve user
          --tokens FILE        imports tokens, one "TOKEN USER DEVICE" per line (users made as needed)
          --insecure-no-auth   serve without tokens: everyone is one user; loopback addresses only
          --rate-limit N       requests a second per device token, as many at once (default 200, burst 1000;
                               0: none), each MiB sent or received counting as one; beyond, 429 with Retry-After
          --public-url URL     where clients reach the server (https://sync.example.org): URLs given out use it
          --behind-proxy       a proxy in front (TLS): URLs given out follow X-Forwarded-Proto and -Host
          --device NAME        token add: the device the token is for
          --read-only          token add: no saves, deletes or uploads
          --prefix PATH/       token add: only record paths at or below PATH (e.g. SaveGames/)
          --max-upload SIZE    token add: the largest upload (e.g. 100MB)
          --max-uploads N      token add: how many uploads it may start
          --expires TIME       token add: how long it works (e.g. 7d, 12h)
          --output FILE        token add: write the token to FILE (mode 0600) instead of printing it
          --yes                user remove: confirm
          --json               token add, token list, user list: print JSON
          --max-upload-size SIZE   the largest tus upload (Tus-Max-Size; default 64GiB)
          --upload-expiry TIME     unfinished uploads are removed this long after their last PATCH (default 24h)
          --chunk-grace TIME       chunks no record names are removed this long after they were last uploaded
                                   or asked for (default 24h)
          --tombstone-days N   deletes are remembered N days (default 30; 0: forever), at least as long as
                               the history; an agent away longer compares everything with the server when it is back
          --history-days N     every version is kept until N days after a newer one replaced it (default 30;
                               0: no history)
          --quota SIZE         how much each user may store, history included (e.g. 10GiB; default none);
                               serve user quota sets one user's
          --log-level LEVEL    debug, info, warning or error (default info)
        \(helpOption)
        """

    static let status = """
        usage: sinkid status [--json] [--watch] [--state DIR] [--config FILE]

        Shows each root (path, files and bytes, state and why), local changes the server has not
        accepted yet, remote changes not yet applied, skipped and ignored paths, transfers, conflicts,
        the server, the last contact with it and the last problem. With no agent running it reads the
        state database, shows what is pending, says the agent is not running and exits 3.

        options:
          --json               one JSON document (docs/status.md)
          --watch              redraw every second until interrupted (with --json: one document per line)
        \(stateOption)
          --config FILE        the config file, for root folders when no agent runs
        \(helpOption)
        """

    static let pause = """
        usage: sinkid pause [ROOT] [--state DIR] [--json]

        Stops sending and applying changes until sinkid resume, also across restarts of the agent
        (the pause is kept in its state folder; status says since when). Local changes are still
        noted and queued; a batch already on its way finishes. With ROOT (a root's name, such as
        SaveGames, or its folder), only that root waits: the others go on syncing.

        options:
        \(stateOption)
        \(jsonOption)
        \(helpOption)
        """

    static let resume = """
        usage: sinkid resume [ROOT] [--state DIR] [--json]

        Ends a pause (the agent's and every root's), and confirms a safety stop (a root that vanished
        or emptied while its records did not: nothing is deleted remotely until you confirm). With
        ROOT, ends only that root's pause.

        options:
        \(stateOption)
        \(jsonOption)
        \(helpOption)
        """

    static let sync = """
        usage: sinkid sync [--verify] [--state DIR] [--json]

        Syncs now: looks at every root again and asks the server for changes at once instead of
        waiting. With --verify, also compares every record here with the server's (the agent does
        this on its own every [agent] verify-interval, and after an unclean stop), repairs every
        difference through the merge rules, and says what it found when done.

        options:
          --verify             compare everything with the server and repair what differs
        \(stateOption)
        \(jsonOption)
        \(helpOption)
        """

    static let retry = """
        usage: sinkid retry [PATH] [--state DIR] [--json]

        Sends again the changes the server refused (sinkid status lists them with the reason): all,
        or those at or below PATH (a record path such as SaveGames/slot1).

        options:
        \(stateOption)
        \(jsonOption)
        \(helpOption)
        """

    static let conflicts = """
        usage: sinkid conflicts [--state DIR] [--json]

        Lists the conflicts the ask merge rule left for sinkid resolve, with both versions and where
        the agent kept a copy of each: those found here, and those other devices of the user found (the
        server keeps them for every device). Every other rule settles a conflict when it is found.

        options:
        \(stateOption)
        \(jsonOption)
        \(helpOption)
        """

    static let resolve = """
        usage: sinkid resolve PATH --keep local|remote|both [--state DIR] [--json]

        Settles the conflict at PATH (a record path from sinkid conflicts), here or one another device
        found: local keeps the file as it is here over the other version, remote takes the other
        version at PATH, both keeps the two: the version the server holds at PATH, the one held back
        by the device that found the conflict beside it as a conflict copy. Every device stops
        listing it, and every device ends with the same files.

        options:
          --keep SIDE          local, remote, or both
        \(stateOption)
        \(jsonOption)
        \(helpOption)
        """

    static let watch = """
        usage: sinkid watch PATH [--state DIR]

        Prints one JSON line for each remote change the agent applies at PATH, a record path such as
        SaveGames/player1.save; with / at the end, everything below it (SaveGames/, or / for every
        root). Runs until interrupted or the agent stops.

        options:
        \(stateOption)
        \(helpOption)
        """

    static let history = """
        usage: sinkid history PATH [--json] [--state DIR]

        Lists the versions the server keeps of PATH (a record path such as SaveGames/a.save, or the
        file's own path in a root), newest first: each version's number, when the server saved it,
        the device, the size, the mode and the start of its SHA-256; deletes are versions too. The
        server keeps every version until --history-days (30 by default) after a newer one replaced
        it. Asks the agent's server with the agent's token.

        options:
          --json               {"path", "versions": [{"version", "time", "device", "size", "sha256", "deleted",
                               "mode", "type"}]}
        \(stateOption)
        \(helpOption)
        """

    static let cat = """
        usage: sinkid cat PATH --version N [--state DIR]

        Writes version N of PATH (from sinkid history) to standard output, every byte checked
        against its hash first.

        options:
          --version N          the version (sinkid history PATH lists them)
        \(stateOption)
        \(helpOption)
        """

    static let restore = """
        usage: sinkid restore PATH --version N [--to NEWPATH] [--dry-run] [--json] [--state DIR]
               sinkid restore FOLDER/ --at TIME [--dry-run] [--json] [--state DIR]

        Makes version N of PATH current again, at PATH or at NEWPATH (the current one kept); or brings
        every path below FOLDER (SaveGames/ for a whole root) back to its state at TIME, in one batch:
        changed files get their old content, type and mode back, files deleted since come back, files
        and folders made since are deleted. A restore is a new change the server saves and every agent,
        this one included, receives through the normal path and merge rules; what it replaces stays in
        history, so a restore can itself be undone.

        options:
          --version N          the version to bring back (sinkid history PATH lists them)
          --to NEWPATH         put it at NEWPATH instead (a record path in a root)
          --at TIME            a moment: RFC 3339 (2026-12-01T18:00:00Z), local (2026-12-01 18:00[:SS])
                               or an age (10m, 2h, 3d)
          --dry-run            list what would change; change nothing
        \(jsonOption)
        \(stateOption)
        \(helpOption)
        """

    static let completion = """
        usage: sinkid completion bash|zsh|fish

        Prints the shell completion script (the Debian package installs all three).

        options:
        \(helpOption)
        """

    static let helpCommand = """
        usage: sinkid help [COMMAND]

        Help for one command, or the list of commands.

        options:
        \(helpOption)
        """

    static let upload = """
        usage: sinkid upload FILE --to URL [--header 'Name: value']... [--metadata key=value]... [--state DIR]

        Uploads FILE to the tus 1.0.0 endpoint URL (any tus server; for sinki, http://HOST:PORT/v1/uploads/)
        and prints the upload's URL. Run again after an interruption, it goes on where the upload stands:
        the file's identity (path, size, mtime, inode), the endpoint and the upload URL are kept in
        state.db in the state folder before the first byte is sent. Only what the server offers in its
        OPTIONS answer is used (checksums, concatenation).

        options:
          --to URL             the tus endpoint where uploads are created (required)
          --header 'N: V'      a header sent with every request (repeatable)
          --metadata K=V       an Upload-Metadata pair (repeatable; filename and filetype are sent by default)
          --state DIR          state folder (default $XDG_STATE_HOME/sinki or ~/.local/state/sinki)
          --token-file FILE    send the token in FILE as Authorization: Bearer
          --ca-file FILE       certificates (PEM) to trust for https:// (a self-signed server or a private
                               CA); default: sinki.conf's [server] ca-file, else $CURL_CA_BUNDLE, else the system's
          --chunk-size SIZE    bytes per PATCH (default 16MiB)
          --parallel N         partial uploads at once for files above 4 chunks, joined by concatenation
                               when offered, then terminated (default 1: helps on long, fat links, not on a LAN)
          --attempts N         failures in a row before giving up (default 10; retries wait 0, 1, 3, 5, 10, then 30 s)
          --max-rate RATE      bytes per second, e.g. 10MiB/s (default unlimited)
          --no-checksum        send no Upload-Checksum even when offered
          --log-level LEVEL    debug, info, warning or error (default info)
        \(helpOption)
        """

    static func command(_ name: String) -> String? { CommandCatalog.spec(name)?.fullHelp }
}
