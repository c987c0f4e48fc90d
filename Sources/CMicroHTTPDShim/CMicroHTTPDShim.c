#include "CMicroHTTPDShim.h"
#include <stdio.h>
#include <string.h>

static void sinki_mhd_format(void *cls, const char *format, va_list ap) {
    const struct sinki_mhd_logger *logger = cls;
    char message[1024];
    vsnprintf(message, sizeof message, format, ap);
    size_t length = strlen(message);
    while (length > 0 && (message[length - 1] == '\n' || message[length - 1] == '\r')) message[--length] = 0;
    logger->log(logger->cls, message);
}

struct MHD_Daemon *sinki_mhd_start(unsigned int flags, int listen_fd, unsigned int thread_pool_size,
                                   unsigned int connection_timeout_seconds, size_t connection_memory_limit,
                                   MHD_AccessHandlerCallback handler, void *handler_cls,
                                   MHD_RequestCompletedCallback completed, void *completed_cls,
                                   sinki_mhd_uri_cb arrived, void *arrived_cls,
                                   MHD_NotifyConnectionCallback notify, void *notify_cls,
                                   unsigned int per_address_limit,
                                   struct sinki_mhd_logger *logger) {
    struct MHD_OptionItem options[11];
    int count = 0;
    // The logger goes first so that messages printed while the daemon starts reach it too.
    if (logger != NULL) options[count++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)sinki_mhd_format, logger};
    options[count++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, listen_fd, NULL};
    options[count++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout_seconds, NULL};
    options[count++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)connection_memory_limit, NULL};
    options[count++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, completed_cls};
    if (arrived != NULL) options[count++] = (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)arrived, arrived_cls};
    if (notify != NULL) options[count++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)notify, notify_cls};
    if (per_address_limit > 0) options[count++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_address_limit, NULL};
    if (thread_pool_size > 1) options[count++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, thread_pool_size, NULL};
    options[count++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    return MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_cls, MHD_OPTION_ARRAY, options, MHD_OPTION_END);
}

int sinki_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}
