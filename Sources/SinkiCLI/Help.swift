/// The help texts; each command's text lists every flag it takes.
enum Help {
    static let overview = """
        sinkid: keep folders in sync across machines through a sinki server.

        usage:
          sinkid [run] --root PATH... [options]   run the agent (foreground)
          sinkid serve --listen ADDR --data DIR    run the sync server
          sinkid upload FILE --to URL              upload one file to a tus server
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
        usage: sinkid serve --listen ADDR --data DIR [--tokens FILE] [--max-upload-size SIZE] [--upload-expiry TIME]
                            [--log-level LEVEL]

        Runs the sync server: records in SQLite under DIR, tus uploads (/v1/uploads/) in DIR/uploads.

        options:
          --listen ADDR        address and port, e.g. 0.0.0.0:7071 or [::1]:7071 (default 127.0.0.1:7071)
          --data DIR           where the server keeps its database (required)
          --tokens FILE        bearer tokens, one "TOKEN USER DEVICE" per line; without it, no auth
          --max-upload-size SIZE   the largest tus upload (Tus-Max-Size; default 64GiB)
          --upload-expiry TIME     unfinished uploads are removed this long after their last PATCH (default 24h)
          --log-level LEVEL    debug, info, warning or error (default info)
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
          --chunk-size SIZE    bytes per PATCH (default 16MiB)
          --parallel N         partial uploads at once for files above 4 chunks, joined by concatenation
                               when offered (default 1: helps on long, fat links, not on a LAN)
          --attempts N         failures in a row before giving up (default 10; retries wait 0, 1, 3, 5, 10, then 30 s)
          --max-rate RATE      bytes per second, e.g. 10MiB/s (default unlimited)
          --no-checksum        send no Upload-Checksum even when offered
          --log-level LEVEL    debug, info, warning or error (default info)

        exit codes: 0 uploaded, 64 usage, 65 the file or the server refused the data, 69 the server is
        out of reach, 74 the file or the state database cannot be read or written, 75 try again later.
        """

    static func command(_ name: String) -> String? {
        switch name {
        case "run": return run
        case "serve": return serve
        case "upload": return upload
        case "help": return "usage: sinkid help COMMAND"
        default: return nil
        }
    }
}
