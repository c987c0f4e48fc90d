// libmicrohttpd's MHD_start_daemon and MHD_get_connection_info are variadic, which Swift cannot call,
// and its logger hands over a printf format with a va_list. Each wrapper here fixes the arguments the
// server uses so the Swift side stays typed. It can go when Swift imports C variadics.
#ifndef SINKI_CMICROHTTPDSHIM_H
#define SINKI_CMICROHTTPDSHIM_H
#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>
// The long-poll watcher's epoll set and wake-up eventfd: Glibc's Swift module does not expose these.
#include <sys/epoll.h>
#include <sys/eventfd.h>

/// Receives one formatted libmicrohttpd log message (no trailing newline).
typedef void (*sinki_mhd_log_cb)(void *cls, const char *message);

/// Where libmicrohttpd's messages go; owned by the caller and kept alive until the daemon stops.
struct sinki_mhd_logger {
    sinki_mhd_log_cb log;
    void *cls;
};

/// Receives a request's target as it arrived, before libmicrohttpd decodes it; what it returns is the
/// request's context (`*con_cls` in the access handler).
typedef void *(*sinki_mhd_uri_cb)(void *cls, const char *uri, struct MHD_Connection *connection);

/// Starts a daemon on an already bound and listening socket: `MHD_start_daemon` with
/// MHD_OPTION_LISTEN_SOCKET, CONNECTION_TIMEOUT, CONNECTION_MEMORY_LIMIT, NOTIFY_COMPLETED,
/// URI_LOG_CALLBACK (when `arrived` is not NULL), NOTIFY_CONNECTION (when `notify` is not NULL),
/// PER_IP_CONNECTION_LIMIT (when `per_address_limit` is above 0), EXTERNAL_LOGGER (when `logger` is
/// not NULL) and THREAD_POOL_SIZE (when above 1).
/// Returns NULL on failure.
struct MHD_Daemon *sinki_mhd_start(unsigned int flags, int listen_fd, unsigned int thread_pool_size,
                                   unsigned int connection_timeout_seconds, size_t connection_memory_limit,
                                   MHD_AccessHandlerCallback handler, void *handler_cls,
                                   MHD_RequestCompletedCallback completed, void *completed_cls,
                                   sinki_mhd_uri_cb arrived, void *arrived_cls,
                                   MHD_NotifyConnectionCallback notify, void *notify_cls,
                                   unsigned int per_address_limit,
                                   struct sinki_mhd_logger *logger);

/// The socket of a connection (MHD_CONNECTION_INFO_CONNECTION_FD), -1 when unknown.
int sinki_mhd_connection_fd(struct MHD_Connection *connection);

/// What a content reader returns to end a response with an error (MHD_CONTENT_READER_END_WITH_ERROR,
/// a macro with a cast, which Swift does not import).
static const ssize_t sinki_mhd_reader_error = MHD_CONTENT_READER_END_WITH_ERROR;
/// What a content reader returns when a body of unknown length is complete (MHD_CONTENT_READER_END_OF_STREAM).
static const ssize_t sinki_mhd_reader_end = MHD_CONTENT_READER_END_OF_STREAM;
#endif
